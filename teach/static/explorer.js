// The explorer: every request carries the protocol, the bounds and the whole path, so the
// server keeps no session and going back is dropping the last step.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  let meta = null;
  let path = [];
  let redo = [];
  let last = null;
  let view = 0; // the step both columns show: the path's end, or where a switched flag blocks the bug
  let loop = null; // a loaded lasso's first cycle step; any change to the path ends the lasso
  let saved = []; // the checkout's saved traces (GET /api/catalogue)
  let forwardTaken = false; // the next drawing follows a step taken forward: play its messages
  let controls = null; // play/pause and speed (HWM.playControls)

  async function api(route, body) {
    const response = await fetch(route, {
      method: body === undefined ? "GET" : "POST",
      headers: { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  }

  function config() {
    const out = {};
    for (const [key, spec] of Object.entries(meta.config)) {
      const input = $("bound-" + key);
      out[key] = spec.choices ? input.value : Number(input.value);
    }
    return out;
  }

  // The flags switched (at any step of the path) from the preset's own values.
  function switched() {
    const flags = {};
    for (const flag of Object.keys(meta.flags)) {
      const v = $("flag-" + flag).value;
      if (v) flags[flag] = v;
    }
    return flags;
  }

  // The protocol explored: the preset, with the switched flags. The steps offered follow it.
  function mainSpec() {
    const flags = switched();
    return Object.keys(flags).length ? { preset: $("protocol").value, flags } : $("protocol").value;
  }

  // The second column: the preset chosen to compare with, or else, once a flag is switched, the
  // protocol as it was before the switch: the same steps under both, side by side.
  function compareSpec() {
    const base = $("compare").value;
    if (base) return base;
    return Object.keys(switched()).length ? $("protocol").value : null;
  }

  function request() {
    const out = { protocol: mainSpec(), config: config(), steps: path, compare: compareSpec(),
                  until_blocked: true };
    if (loop !== null) out.loop = loop;
    return out;
  }

  // `toDivergence`: after a flag or the comparison changed, show the step where the two protocols part.
  async function refresh(toDivergence) {
    $("error").textContent = "";
    if (loop !== null && loop > path.length) loop = null;
    try {
      last = await api("/api/state", request());
    } catch (e) {
      $("error").textContent = e.message;
      forwardTaken = false;
      return false;
    }
    const divergence = last.divergence;
    view = toDivergence === true && divergence ? Math.min(divergence.step, path.length) : path.length;
    draw();
    // The whole request in the address: a link to this page shows this state (for a class or a bug report).
    history.replaceState(null, "", "#" + encodeURIComponent(JSON.stringify(request())));
    return true;
  }

  // Restore protocol, bounds, comparison and path from a link made by refresh().
  function restore() {
    if (location.hash.length < 2) return;
    let saved;
    try {
      saved = JSON.parse(decodeURIComponent(location.hash.slice(1)));
    } catch (e) {
      $("error").textContent = "this link does not describe an explorer state";
      return;
    }
    const flags = {};
    if (typeof saved.protocol === "string") $("protocol").value = saved.protocol;
    else if (saved.protocol && typeof saved.protocol === "object") {
      $("protocol").value = saved.protocol.preset || "raft";
      Object.assign(flags, saved.protocol.flags || {});
    }
    for (const [key, value] of Object.entries(saved.config || {})) {
      if ($("bound-" + key)) $("bound-" + key).value = String(value);
    }
    const compare = saved.compare;
    if (typeof compare === "string" && compare !== $("protocol").value) $("compare").value = compare;
    else if (compare && typeof compare === "object") {
      // An older link: the flags were the comparison's; now they are switched on the explored protocol.
      if (compare.preset !== $("protocol").value) $("compare").value = compare.preset;
      Object.assign(flags, compare.flags || {});
    }
    for (const [flag, value] of Object.entries(flags)) {
      if ($("flag-" + flag)) $("flag-" + flag).value = String(value);
    }
    path = Array.isArray(saved.steps) ? saved.steps : [];
    loop = Number.isInteger(saved.loop) ? saved.loop : null;
  }

  // `animate`: the step viewed was just taken (or played) forward: its messages travel.
  function drawColumns(animate, done) {
    const columns = $("columns");
    columns.replaceChildren();
    for (const column of last.columns) {
      const el = HWM.el("div", {});
      HWM.showColumn(el, column, view);
      columns.appendChild(el);
    }
    const slider = $("view");
    slider.max = String(path.length);
    slider.value = String(view);
    $("viewing").textContent = view === path.length ? "the last step" :
      "step " + view + " of " + path.length + " (the enabled steps below follow the last step)";
    const divergence = last.divergence;
    $("notice").textContent = divergence ? "\u2192 " + divergence.text : "";
    document.body.dataset.view = String(view);
    document.body.dataset.divergence = divergence ? String(divergence.step) : "";
    for (const li of document.querySelectorAll("#steps li")) {
      li.classList.toggle("current", Number(li.dataset.step) === view);
    }
    if (animate && view > 0) HWM.animate(columns, done);
    else {
      HWM.stopAnimation();
      document.body.dataset.animating = "0";
      if (done) done();
    }
  }

  function draw() {
    const enabled = $("enabled");
    enabled.replaceChildren();
    for (const option of last.enabled) {
      const b = HWM.el("button", { class: "action", "data-step": JSON.stringify(option.step) }, option.label);
      b.addEventListener("click", () => take(option.step));
      enabled.appendChild(b);
    }
    if (!last.enabled.length) enabled.appendChild(HWM.el("span", { class: "meta" }, "no step is enabled"));
    const refused = $("refused");
    refused.replaceChildren();
    for (const r of last.refused) refused.appendChild(HWM.el("li", {}, r.label + ": " + r.reason));
    // The path's steps: from the column that goes furthest (the explored protocol may stop earlier).
    const longest = last.columns.reduce((x, c) => (c.frames.length > x.frames.length ? c : x));
    $("steps").replaceChildren(HWM.stepList(longest.frames, view, (k) => goTo(k)));
    if (last.divergence) {
      const li = document.querySelector('#steps li[data-step="' + last.divergence.step + '"]');
      if (li) li.classList.add("fix-blocked");
    }
    drawColumns(forwardTaken && view === path.length);
    forwardTaken = false;
    $("status").textContent = last.protocol + ", " + path.length + " steps" +
      (last.reachable < path.length ? " (step " + (last.reachable + 1) + " is not enabled under it; a step " +
        "taken now replaces the rest)" : "");
    document.body.dataset.steps = String(path.length);
    document.body.dataset.reachable = String(last.reachable);
  }

  async function take(step) {
    if (controls) controls.stop();
    forwardTaken = true;
    loop = null;
    path = path.slice(0, last.reachable); // past a step the protocol forbids, the path goes on from here
    path.push(step);
    redo = [];
    if (!(await refresh())) path.pop();
  }

  async function goTo(k) {
    loop = null;
    while (path.length > k) redo.push(path.pop());
    await refresh();
  }

  async function back() {
    if (!path.length) return;
    loop = null;
    redo.push(path.pop());
    await refresh();
  }

  async function forward() {
    if (!redo.length) return;
    if (controls) controls.stop();
    forwardTaken = true;
    loop = null;
    path.push(redo.pop());
    if (!(await refresh())) redo.push(path.pop());
  }

  async function search() {
    $("found").replaceChildren(HWM.el("span", { class: "meta" }, "searching..."));
    let data;
    try {
      data = await api("/api/search", { protocol: mainSpec(), config: config() });
    } catch (e) {
      $("error").textContent = e.message;
      $("found").replaceChildren();
      return;
    }
    const found = $("found");
    found.replaceChildren(HWM.el("span", { class: "meta" },
      data.states.toLocaleString() + " states" + (data.complete ? "" : " (search stopped early)") + ": "));
    for (const r of data.results) {
      if (!r.found) continue;
      const sign = r.kind === "always" ? "\u2717 " : "\u2713 ";
      const b = HWM.el("button", { class: "found " + r.kind, "data-property": r.property },
        sign + r.property + " (" + r.length + " steps)");
      b.title = r.finding;
      b.addEventListener("click", async () => { path = r.steps.slice(); redo = []; loop = null; await refresh(); });
      found.appendChild(b);
    }
    document.body.dataset.searched = "1";
  }

  // Offer only what fits the chosen preset's system: its flags, and presets of the same system to compare.
  function fitToSystem() {
    const preset = meta.presets[$("protocol").value];
    if (!preset) return;
    for (const flag of Object.keys(meta.flags)) {
      const select = $("flag-" + flag);
      const fits = preset.switchable.includes(flag);
      select.hidden = !fits;
      if (!fits) select.value = "";
    }
    for (const o of $("compare").options) {
      o.hidden = o.value !== "" && meta.presets[o.value].system !== preset.system;
      if (o.hidden && o.selected) $("compare").value = "";
    }
  }

  // The saved traces of the chosen preset; loading one sets its bounds and its path (and a lasso's cycle).
  function offerSaved() {
    const select = $("saved");
    select.replaceChildren();
    option(select, "", "(choose)");
    saved.forEach((t, k) => {
      if (t.protocol === $("protocol").value)
        option(select, String(k), t.file + (t.loop ? " (lasso)" : "") + ": " + (t.property || t.expect));
    });
    select.disabled = select.options.length === 1;
  }

  async function loadSaved() {
    const t = saved[Number($("saved").value)];
    if (!t) return;
    for (const [key, value] of Object.entries(t.config)) {
      if ($("bound-" + key)) $("bound-" + key).value = String(value);
    }
    path = t.steps.slice();
    redo = [];
    loop = t.loop;
    $("found").replaceChildren();
    await refresh();
  }

  function option(select, value, text) {
    select.appendChild(HWM.el("option", { value }, text === undefined ? value : text));
  }

  async function start() {
    meta = await api("/api/presets");
    const protocol = $("protocol");
    const compare = $("compare");
    for (const [name, p] of Object.entries(meta.presets)) {
      option(protocol, name, name + (p.broken ? " (broken)" : ""));
      option(compare, name);
    }
    protocol.value = new URLSearchParams(location.search).get("protocol") || "raft";
    const bounds = $("bounds");
    for (const [key, spec] of Object.entries(meta.config)) {
      let input;
      if (spec.choices) {
        input = HWM.el("select", { id: "bound-" + key });
        for (const c of spec.choices) option(input, c);
      } else {
        input = HWM.el("input", { id: "bound-" + key, type: "number", min: spec.min, max: spec.max,
                                   style: "width:3.5em" });
      }
      input.value = String(spec.default);
      input.addEventListener("change", () => { path = []; redo = []; $("found").replaceChildren(); refresh(); });
      const label = HWM.el("label", {}, " " + key.replace("_", " ") + " ");
      label.appendChild(input);
      bounds.appendChild(label);
    }
    const flags = $("flags");
    for (const [flag, values] of Object.entries(meta.flags)) {
      const select = HWM.el("select", { id: "flag-" + flag, title: meta.meanings[flag] });
      option(select, "", flag + ": as is");
      for (const v of values) option(select, v, flag + "=" + v);
      select.addEventListener("change", () => refresh(true));
      flags.appendChild(select);
    }
    protocol.addEventListener("change", () => {
      path = []; redo = []; loop = null; $("found").replaceChildren(); fitToSystem(); offerSaved(); refresh();
    });
    compare.addEventListener("change", () => refresh(true));
    $("view").addEventListener("input", () => { controls.stop(); view = Number($("view").value); drawColumns(); });
    // Play the path from the step viewed to its end, each step's messages travelling.
    controls = HWM.playControls($("play"), $("speed"), (done) => { view += 1; drawColumns(true, done); },
      () => view >= path.length, () => { view = 0; drawColumns(); });
    $("reset").addEventListener("click", () => { path = []; redo = []; loop = null; refresh(); });
    $("saved").addEventListener("change", loadSaved);
    $("back").addEventListener("click", back);
    $("forward").addEventListener("click", forward);
    $("search").addEventListener("click", search);
    document.addEventListener("keydown", (e) => {
      if (e.target.tagName === "SELECT" || e.target.tagName === "INPUT") return;
      if (e.key === "ArrowLeft") back();
      else if (e.key === "ArrowRight") forward();
      else return;
      e.preventDefault();
    });
    restore();
    fitToSystem();
    try {
      saved = (await api("/api/catalogue")).traces;
    } catch (e) {
      saved = [];
    }
    offerSaved();
    await refresh();
    document.body.dataset.ready = "1";
  }

  start().catch((e) => { $("error").textContent = e.message; });
})();
