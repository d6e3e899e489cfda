// The explorer on the student's own node: the server holds the running cluster; each click is
// one step, and going back restarts the cluster and runs the path up to there again.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const GROUPS = { network: "Messages in flight: deliver or drop", faults: "Crash or restart a node",
                   partitions: "Partition or heal the network", clients: "Client requests", clock: "The clock" };
  let last = null;

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

  async function send(route, body) {
    $("error").textContent = "";
    document.body.dataset.busy = "1";
    try {
      draw(await api(route, body));
      // A message delivered (or dropped) travels from its channel; going back draws at once.
      if (route === "/api/node/step") HWM.animate($("picture"));
    } catch (e) {
      $("error").textContent = e.message;
    } finally {
      document.body.dataset.busy = "0";
    }
  }

  function draw(data) {
    last = data;
    $("command").textContent = data.command.join(" ");
    $("picture").innerHTML = data.svg;
    $("findings").textContent = data.findings.length ? "Found: " + data.findings.join("; ") : "";
    if (data.error) $("error").textContent = "The cluster stopped: " + data.error;
    const events = $("events");
    const shown = data.events.slice(0, 12);  // a settle can say hundreds of things
    if (data.events.length > shown.length) shown.push("... and " + (data.events.length - shown.length) + " more");
    events.replaceChildren(...shown.map((e) => HWM.el("li", {}, e)));
    const offered = $("offered");
    offered.replaceChildren();
    for (const [group, heading] of Object.entries(GROUPS)) {
      const options = data.offered.filter((o) => o.group === group);
      if (!options.length) continue;
      const div = HWM.el("div", { class: "actions", "data-group": group });
      div.appendChild(HWM.el("div", { class: "meta" }, heading));
      for (const o of options) {
        const b = HWM.el("button", { class: "action", "data-step": JSON.stringify(o.step) }, o.label);
        b.addEventListener("click", () => send("/api/node/step", { step: o.step }));
        div.appendChild(b);
      }
      offered.appendChild(div);
    }
    const rows = $("history").querySelector("tbody");
    rows.replaceChildren(...data.history.map((op) => {
      const tr = HWM.el("tr", { class: "op " + op.status });
      for (const text of [op.id, op.text, op.status, op.reply || ""]) tr.appendChild(HWM.el("td", {}, String(text)));
      return tr;
    }));
    const steps = $("steps");
    steps.replaceChildren();
    ["(started)"].concat(data.steps.map((s) => s.label)).forEach((label, k) => {
      const li = HWM.el("li", { "data-step": String(k), class: k === data.steps.length ? "current" : "" }, label);
      li.addEventListener("click", () => send("/api/node/back", { to: k }));
      steps.appendChild(li);
    });
    $("status").textContent = data.steps.length + " steps, " + data.in_flight.length + " messages in flight";
    document.body.dataset.steps = String(data.steps.length);
    document.body.dataset.inFlight = String(data.in_flight.length);
    document.body.dataset.findings = String(data.findings.length);
  }

  $("back").addEventListener("click", () => {
    if (last && last.steps.length) send("/api/node/back", { to: last.steps.length - 1 });
  });
  $("save").addEventListener("click", async () => {
    $("saved").textContent = "";
    try {
      const data = await api("/api/node/save", { name: $("name").value });
      draw(data);
      $("saved").textContent = "saved " + data.saved + "; run it again: hwm replay " + data.saved + " -- " +
        data.command.join(" ");
      document.body.dataset.saved = data.saved;
    } catch (e) {
      $("error").textContent = e.message;
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT") return;
    if (e.key === "ArrowLeft") { $("back").click(); e.preventDefault(); }
  });
  api("/api/node").then((data) => { draw(data); document.body.dataset.ready = "1"; })
    .catch((e) => { $("error").textContent = e.message; });
})();
