// The trace page: a slider and keys (left/right, home/end, v for the violation) over the frames.
// A lasso (a liveness counterexample) wraps: forward from its last step goes back to the step
// its cycle starts at, as the cluster does for ever. Stepping forward plays the step's messages;
// play steps on by itself. The address ends in #step=N, so a link opens that step.
"use strict";

(function () {
  const data = JSON.parse(document.getElementById("hwm-data").textContent);
  const length = Math.max(...data.columns.map((c) => c.frames.length));
  const slider = document.getElementById("slider");
  const counter = document.getElementById("counter");
  const columns = document.getElementById("columns");
  const steps = document.getElementById("steps");
  slider.max = String(length - 1);
  let current = 0;
  const loop = data.columns[0].frames[0].loop;
  const lasso = loop !== null && loop !== undefined;
  const cycleBar = document.getElementById("cycle");
  if (lasso) {
    cycleBar.hidden = false;
    cycleBar.textContent = "\u21bb a lasso: steps 1.." + (loop - 1) + " lead to a cycle, steps " + loop + ".." +
      (length - 1) + ", that repeats for ever (after step " + (length - 1) + " the cluster is back in the state " +
      "before step " + loop + "); stepping forward from the last step wraps to step " + loop + ", c jumps there";
  }

  // `animate`: the step was taken forward, so its messages travel; `done` runs once they arrived.
  function go(i, animate, done) {
    if (lasso && i > length - 1) i = loop; // the cycle repeats
    const target = Math.max(0, Math.min(length - 1, i));
    const forward = target === current + 1 || (lasso && current === length - 1 && target === loop);
    current = target;
    slider.value = String(current);
    const frame = data.columns[0].frames[Math.min(current, data.columns[0].frames.length - 1)];
    counter.textContent = "step " + current + " / " + (length - 1) +
      (lasso ? (frame.cycle ? "  (cycle " + (current - loop + 1) + " of " + (length - loop) + ")" : "  (stem)") : "");
    HWM.stopAnimation();
    columns.replaceChildren();
    for (const column of data.columns) {
      const el = HWM.el("div", {});
      HWM.showColumn(el, column, current);
      columns.appendChild(el);
    }
    steps.replaceChildren(HWM.stepList(data.columns[0].frames, current, (k) => user(k)));
    document.body.dataset.step = String(current);
    document.body.dataset.cycle = lasso && frame.cycle ? "1" : "0";
    if (location.hash !== "#step=" + current) history.replaceState(null, "", "#step=" + current);
    if (animate && forward) HWM.animate(columns, done);
    else {
      document.body.dataset.animating = "0";
      if (done) done();
    }
  }

  // The step a link names: #step=N (out of range: the nearest step).
  function linked() {
    const m = /^#step=(\d+)$/.exec(location.hash);
    return m ? Number(m[1]) : null;
  }

  // A step the reader chose (key, button, slider, list): it ends a play.
  function user(k, animate) {
    controls.stop();
    go(k, animate);
  }

  // A replay stops at the violation of the trace's property (or the blocked step): the last
  // such frame is the one the trace is about.
  const frames0 = data.columns[0].frames;
  let violating = -1;
  frames0.forEach((f, k) => { if (Object.keys(f.violations).length || f.blocked) violating = k; });
  const controls = HWM.playControls(document.getElementById("play"), document.getElementById("speed"),
    (done) => go(current + 1, true, done), () => !lasso && current >= length - 1, () => go(0));
  document.getElementById("first").addEventListener("click", () => user(0));
  document.getElementById("back").addEventListener("click", () => user(current - 1));
  document.getElementById("forward").addEventListener("click", () => user(current + 1, true));
  document.getElementById("last").addEventListener("click", () => user(length - 1));
  const jump = document.getElementById("jump");
  if (violating < 0) jump.disabled = true;
  jump.addEventListener("click", () => user(violating));
  slider.addEventListener("input", () => user(Number(slider.value)));
  window.addEventListener("hashchange", () => { const k = linked(); if (k !== null && k !== current) user(k); });
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "SELECT" || e.target.tagName === "BUTTON" && e.key === " ") return;
    if (e.key === "ArrowRight" || e.key === "l") user(current + 1, true);
    else if (e.key === "ArrowLeft" || e.key === "h") user(current - 1);
    else if (e.key === "Home") user(0);
    else if (e.key === "End") user(length - 1);
    else if (e.key === "v" && violating >= 0) user(violating);
    else if (e.key === "c" && lasso) user(loop);
    else if (e.key === " ") document.getElementById("play").click();
    else return;
    e.preventDefault();
  });
  go(linked() === null ? 0 : linked());
})();
