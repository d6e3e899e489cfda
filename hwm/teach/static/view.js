// Drawing frames: shared by the trace page and the explorer. A frame arrives
// from Python with its SVG already drawn (hwm/teach/svg.py) and its reasons.
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
      const li = HWM.el("li", { class: cls.trim(), "data-step": String(k) }, f.label);
      li.addEventListener("click", () => go(k));
      ol.appendChild(li);
    });
    return ol;
  },
};
