// Drawing frames: shared by the trace page and the explorer. A frame arrives
// from Python with its SVG already drawn (teach/svg.py) and its reasons.
"use strict";

const HWM = {
  el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  },

  // The list of reasons, findings and messages of one frame.
  reasons(frame) {
    const ul = HWM.el("ul", { class: "why" });
    for (const line of frame.lines) ul.appendChild(HWM.el("li", frame.blocked ? { class: "blocked" } : {}, line));
    for (const [name, text] of Object.entries(frame.violations))
      ul.appendChild(HWM.el("li", { class: "violation" }, name + " violated: " + text));
    for (const [name, text] of Object.entries(frame.witnesses))
      ul.appendChild(HWM.el("li", { class: "witness" }, "witness " + name + ": " + text));
    for (const m of frame.in_flight) ul.appendChild(HWM.el("li", {}, "in flight: " + m));
    if (frame.departs) ul.insertBefore(HWM.el("li", { class: "departs" }, "\u21c4 " + frame.departs), ul.firstChild);
    return ul;
  },

  // Draw column.frames[i] (or its last frame, when the column stopped earlier) into el.
  showColumn(el, column, i) {
    const k = Math.min(i, column.frames.length - 1);
    const frame = column.frames[k];
    el.replaceChildren();
    el.className = "column" + (frame.blocked ? " blocked" : "") +
      (Object.keys(frame.violations).length ? " violating" : "");
    el.appendChild(HWM.el("h2", {}, column.heading));
    const picture = HWM.el("div", { class: "picture" });
    picture.innerHTML = frame.svg;
    el.appendChild(picture);
    el.appendChild(HWM.reasons(frame));
    return frame;
  },

  // The numbered list of steps; click one to go there.
  stepList(frames, current, go) {
    const ol = HWM.el("ol", { class: "steps", start: "0" });
    frames.forEach((f, k) => {
      let cls = k === current ? "current" : "";
      if (Object.keys(f.violations).length) cls += " violating";
      if (f.blocked) cls += " blocked";
      if (f.cycle) cls += " cycle";
      if (f.loop !== null && f.loop !== undefined && k === f.loop) cls += " loop-start";
      if (f.cycle && k === frames.length - 1) cls += " loop-end";
      if (f.departs) cls += " departs";
      const li = HWM.el("li", { class: cls.trim(), "data-step": String(k) }, f.label);
      li.addEventListener("click", () => go(k));
      ol.appendChild(li);
    });
    return ol;
  },
};

// Messages that move: stepping forward plays the step's messages along their arrows (an append,
// then its reply), at the chosen speed; pause freezes them where they are. One animation at a
// time, shared by the trace page and the explorer. `document.body.dataset.animating` is "1"
// while messages travel (the browser tests wait on it).
HWM.player = { speed: 1, paused: false, run: null, phase: 900 /* ms per phase at speed 1 */,
               changed() {} /* the play button's label follows: set by playControls */ };

HWM.stopAnimation = function () {
  const run = HWM.player.run;
  if (run && !run.done) run.finish();
};

HWM.animate = function (root, onDone) {
  HWM.stopAnimation();
  const groups = Array.from(root.querySelectorAll("g.message")).filter((g) => !g.classList.contains("in-flight"));
  const run = { done: false };
  HWM.player.run = run;
  const parts = groups.map((g) => {
    const path = g.querySelector("path.message-path");
    return { g, path, dot: g.querySelector("circle.message-dot"), length: path.getTotalLength(),
             order: Number(g.dataset.order), start: Number(g.dataset.start), stop: Number(g.dataset.stop) };
  });
  const phases = parts.length ? Math.max(...parts.map((p) => p.order)) + 1 : 0;
  function place(p, f) {
    const point = p.path.getPointAtLength(p.length * f);
    p.dot.setAttribute("cx", point.x.toFixed(1));
    p.dot.setAttribute("cy", point.y.toFixed(1));
  }
  function show(t) {
    for (const p of parts) {
      const local = Math.max(0, Math.min(1, t - p.order));
      const eased = local < 0.5 ? 2 * local * local : 1 - 2 * (1 - local) * (1 - local);
      place(p, p.start + (p.stop - p.start) * eased);
      p.dot.setAttribute("opacity", t < p.order ? "0" : "1");
      p.g.setAttribute("opacity", t < p.order ? "0.25" : "1");
    }
  }
  run.finish = function () {
    if (run.done) return;
    run.done = true;
    show(phases);
    for (const p of parts) p.dot.setAttribute("opacity", "0"); // at rest the numbered badge shows where it is
    document.body.dataset.animating = "0";
    HWM.player.changed();
    if (onDone) onDone();
  };
  if (!parts.length) { run.finish(); return run; }
  document.body.dataset.animating = "1";
  HWM.player.changed();
  let elapsed = 0;
  let last = null;
  show(0);
  function tick(now) {
    if (run.done) return;
    if (last !== null && !HWM.player.paused) elapsed += (now - last) * HWM.player.speed;
    last = now;
    const t = elapsed / HWM.player.phase;
    if (t >= phases) { run.finish(); return; }
    show(t);
    requestAnimationFrame(tick);
  }
  requestAnimationFrame(tick);
  return run;
};

// The play/pause button and the speed menu: play steps forward by itself, each step's messages
// travelling before the next; pause stops there, messages frozen mid-way.
// `rewind` (optional): where play starts when pressed at the end.
HWM.playControls = function (playButton, speedSelect, stepForward, atEnd, rewind) {
  let playing = false;
  let timer = null;
  function moving() {
    return HWM.player.run && !HWM.player.run.done && !HWM.player.paused;
  }
  // "pause" while the page plays by itself or a step's messages travel; "play" otherwise.
  function label() {
    playButton.textContent = playing || moving() ? "\u275a\u275a pause" : "\u25b6\u25b6 play";
    document.body.dataset.playing = playing ? "1" : "0";
    document.body.dataset.paused = HWM.player.paused ? "1" : "0";
  }
  function next() {
    timer = null;
    if (!playing) return;
    if (atEnd()) { playing = false; label(); return; }
    stepForward(() => { if (playing) timer = setTimeout(next, 500 / HWM.player.speed); });
  }
  playButton.addEventListener("click", () => {
    if (playing || moving()) {
      playing = false;
      HWM.player.paused = true;
      if (timer) clearTimeout(timer);
      timer = null;
    } else {
      HWM.player.paused = false;
      playing = true;
      const run = HWM.player.run;
      if ((!run || run.done) && atEnd() && rewind) rewind();
      if (!run || run.done) next();
      else waitThenNext(run);
    }
    label();
  });
  function waitThenNext(run) {
    // Resumed mid-step: go on once this step's messages have arrived.
    const poll = () => { if (!playing) return; if (run.done) timer = setTimeout(next, 500 / HWM.player.speed);
                         else timer = setTimeout(poll, 50); };
    poll();
  }
  speedSelect.addEventListener("change", () => { HWM.player.speed = Number(speedSelect.value) || 1; });
  HWM.player.speed = Number(speedSelect.value) || 1;
  HWM.player.changed = label;
  label();
  return { stop() { playing = false; if (timer) clearTimeout(timer); timer = null; HWM.player.paused = false; label(); } };
};
