// The trace page: a slider and keys (left/right, home/end, v for the violation) over the frames.
// A lasso (a liveness counterexample) wraps: forward from its last step goes back to the step
// its cycle starts at, as the cluster does for ever.
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

  function go(i) {
    if (lasso && i > length - 1) i = loop; // the cycle repeats
    current = Math.max(0, Math.min(length - 1, i));
    slider.value = String(current);
    const frame = data.columns[0].frames[Math.min(current, data.columns[0].frames.length - 1)];
    counter.textContent = "step " + current + " / " + (length - 1) +
      (lasso ? (frame.cycle ? "  (cycle " + (current - loop + 1) + " of " + (length - loop) + ")" : "  (stem)") : "");
    columns.replaceChildren();
    for (const column of data.columns) {
      const el = HWM.el("div", {});
      HWM.showColumn(el, column, current);
      columns.appendChild(el);
    }
    steps.replaceChildren(HWM.stepList(data.columns[0].frames, current, go));
    document.body.dataset.step = String(current);
    document.body.dataset.cycle = lasso && frame.cycle ? "1" : "0";
  }

  // A replay stops at the violation of the trace's property (or the blocked step): the last
  // such frame is the one the trace is about.
  const frames0 = data.columns[0].frames;
  let violating = -1;
  frames0.forEach((f, k) => { if (Object.keys(f.violations).length || f.blocked) violating = k; });
  document.getElementById("first").addEventListener("click", () => go(0));
  document.getElementById("back").addEventListener("click", () => go(current - 1));
  document.getElementById("forward").addEventListener("click", () => go(current + 1));
  document.getElementById("last").addEventListener("click", () => go(length - 1));
  const jump = document.getElementById("jump");
  if (violating < 0) jump.disabled = true;
  jump.addEventListener("click", () => go(violating));
  slider.addEventListener("input", () => go(Number(slider.value)));
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowRight" || e.key === "l") go(current + 1);
    else if (e.key === "ArrowLeft" || e.key === "h") go(current - 1);
    else if (e.key === "Home") go(0);
    else if (e.key === "End") go(length - 1);
    else if (e.key === "v" && violating >= 0) go(violating);
    else if (e.key === "c" && lasso) go(loop);
    else return;
    e.preventDefault();
  });
  go(0);
})();
