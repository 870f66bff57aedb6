// kubelab ui: the path of a Service, live. Plain DOM, no framework, no build step (kubelab/ui/server.py).
"use strict";

const state = { selected: decodeURIComponent(location.hash.slice(1)) || null, query: "", pathBusy: false, pathAgain: false,
                pod: null, podBusy: false, podAgain: false };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function getJSON(url) {
  const resp = await fetch(url, { cache: "no-store" });
  if (!resp.ok) throw new Error(`${url}: ${resp.status}`);
  return resp.json();
}

function setStatus(text) { document.getElementById("status").textContent = text; }

// --- the list of Services: a search and one page of matches, never all of them at once ---------------

let searchTimer = null;
async function loadServices() {
  const data = await getJSON(`/ui/v1/services?limit=200&q=${encodeURIComponent(state.query)}`);
  const list = document.getElementById("services");
  list.replaceChildren(...data.items.map((s) => {
    const ports = s.ports.map((p) => `${p.port}/${p.protocol}` + (p.nodePort ? `:${p.nodePort}` : "")).join(", ");
    const item = el("li", { "data-testid": "service", "data-key": s.key, class: s.key === state.selected ? "selected" : null },
      el("div", {}, s.key),
      el("div", { class: "meta" }, `${s.type} ${s.clusterIP || ""} ${ports} · ${s.endpoints} ready endpoints`));
    item.addEventListener("click", () => select(s.key));
    return item;
  }));
  document.getElementById("count").textContent =
    `${data.matched} of ${data.total} Services` + (data.matched > data.items.length ? ` (first ${data.items.length}; refine the search)` : "");
}

function select(key) {
  state.selected = key;
  location.hash = encodeURIComponent(key);
  for (const li of document.querySelectorAll("#services li")) li.classList.toggle("selected", li.dataset.key === key);
  loadPath();
  loadTrace();
}

// --- the path: entries -> KUBE-SVC -> KUBE-SEP (probability) -> pod and its node, per node ----------
// (nftables mode: map elements -> service chain -> numgen vmap arm i of N, share 1/N -> endpoint chain)

function branchRow(b) {
  const prob = b.share ? b.share : b.probability === null ? "rest" : b.probability;
  const pod = b.pod ? `${b.pod.name} on ${b.pod.node || "?"}` : "no pod has this IP";
  return el("div", { class: "branch", "data-testid": "branch", "data-probability": b.share ? null : prob,
                     "data-share": b.share || null, "data-pod": b.pod ? b.pod.name : "" },
    el("span", { class: "prob" }, b.share ? `${b.index} : share ${b.share}` : `probability ${prob}`),
    el("span", { class: "arrow" }, "→"),
    el("span", { class: "box chain" }, b.chain), el("span", { class: "arrow" }, "→"),
    el("span", { class: "box" }, `DNAT ${b.destination || "?"}`), el("span", { class: "arrow" }, "→"),
    el("span", { class: "box pod" + (b.pod ? "" : " missing") }, pod));
}

function nodePath(n) {
  const card = el("div", { class: "node-path", "data-testid": "node-path", "data-node": n.node, "data-mode": n.mode },
    el("h3", {}, n.node, n.mode ? el("span", { class: "mode" }, ` ${n.mode} mode`) : null));
  if (n.error) { card.append(el("p", { class: "missing" }, n.error)); return card; }
  if (!n.ports.length) { card.append(el("p", { class: "hint" }, "no rule of this Service on this node")); return card; }
  for (const port of n.ports) {
    const entries = el("div", { class: "branches" }, ...port.entries.map((e) =>
      el("span", { class: "box entry" }, `${e.kind} ${e.destination || "*"}:${e.port || "?"}/${e.protocol || "?"}`)));
    const flow = el("div", { class: "flow" }, entries, el("span", { class: "arrow" }, "→"));
    if (port.chain) {
      flow.append(el("span", { class: "box chain", "data-testid": "svc-chain" }, port.chain), el("span", { class: "arrow" }, "→"));
      if (port.numgen) flow.append(el("span", { class: "box vmap", "data-testid": "numgen" }, `${port.numgen} vmap`), el("span", { class: "arrow" }, "→"));
      flow.append(port.branches.length ? el("div", { class: "branches" }, ...port.branches.map(branchRow))
                                        : el("span", { class: "missing" }, "no endpoints"));
    } else {
      flow.append(el("span", { class: "box" }, port.entries.map((e) => e.chain).join(", ")));
    }
    card.append(port.port ? el("div", { class: "meta" }, `port ${port.port}`) : "", flow);
  }
  return card;
}

async function loadPath() {
  if (!state.selected) return;
  if (state.pathBusy) { state.pathAgain = true; return; }
  state.pathBusy = true;
  try {
    const key = state.selected;
    const resp = await fetch(`/ui/v1/path?service=${encodeURIComponent(key)}`, { cache: "no-store" });
    const target = document.getElementById("path");
    if (key !== state.selected) return;
    if (resp.status === 404) { target.replaceChildren(el("p", { class: "missing" }, `Service ${key} does not exist (any more)`)); return; }
    if (!resp.ok) throw new Error(`path: ${resp.status}`);
    const data = await resp.json();
    const s = data.service;
    const head = el("h2", { "data-testid": "path-title" }, `${s.key} · ${s.type} ${s.clusterIP || ""}`);
    target.replaceChildren(head, ...data.nodes.map(nodePath));
    target.dataset.loaded = key;
  } finally {
    state.pathBusy = false;
    if (state.pathAgain) { state.pathAgain = false; loadPath(); }
  }
}

// --- the last change of the Service as a waterfall (kubelab trace) ---------------------------------

async function loadTrace() {
  if (!state.selected) return;
  const data = await getJSON(`/ui/v1/trace?service=${encodeURIComponent(state.selected)}`);
  const target = document.getElementById("trace");
  if (!data.found) { target.replaceChildren(el("h2", {}, "Last change"), el("p", { class: "hint" }, data.message || "nothing recorded")); return; }
  const total = Math.max(0.001, ...data.steps.map((s) => s.sinceAccepted + (s.took || 0)));
  const rows = data.steps.map((s) => el("div", { class: "step", "data-testid": "trace-step" },
    el("span", { class: "label", title: s.detail }, `${s.step} · ${s.component}`),
    el("span", { class: "bar", style: `margin-left:${(300 * s.sinceAccepted / total).toFixed(1)}px;width:${Math.max(2, 300 * (s.took || 0) / total).toFixed(1)}px` }),
    el("span", { class: "ms" }, `+${(1000 * s.sinceAccepted).toFixed(1)} ms`)));
  target.replaceChildren(el("h2", {}, `Last change: revision ${data.revision}`), el("div", { class: "waterfall" }, ...rows));
}

// --- kubelab explain pod: the scheduler's verdict per node, and each node's handling of packets to it --

function explainTable(sch) {
  if (!sch) return el("p", { class: "hint" }, "scheduler verdicts not available");
  if (sch.error) return el("p", { class: "missing" }, sch.error);
  const head = el("tr", {}, el("th", {}, "node"), el("th", {}, "filter verdict"),
    ...sch.plugins.map((p) => el("th", {}, p)), el("th", {}, "total"), el("th", {}, ""));
  const rows = sch.nodes.map((v) => el("tr", { "data-testid": "explain-node", "data-node": v.name, "data-fits": v.plugin === null ? "yes" : "no" },
    el("td", {}, v.name),
    el("td", { class: v.plugin === null ? "" : "missing" }, v.plugin === null ? "fits" : `${v.plugin}: ${v.reasons.join("; ")}`),
    ...sch.plugins.map((p) => el("td", {}, v.scores[p] === undefined ? "" : String(v.scores[p]))),
    el("td", {}, v.total === null ? "" : String(v.total)), el("td", {}, v.mark)));
  return el("div", {},
    el("p", { class: "meta" }, `requests ${sch.requests} · ${sch.strategy}` + (sch.bound_to ? ` · bound to ${sch.bound_to}` : "")),
    el("table", { class: "explain", "data-testid": "explain-scheduling" }, head, ...rows),
    sch.message ? el("p", { class: "missing" }, sch.message) : null);
}

function packetTable(services) {
  if (!services.length) return el("p", { class: "hint", "data-testid": "explain-no-services" }, "no Service has this pod as an endpoint");
  const head = el("tr", {}, el("th", {}, "node"), el("th", {}, "Service port"), el("th", {}, "entries"),
    el("th", {}, "service chain"), el("th", {}, "branch to this pod"), el("th", {}, "DNAT"));
  const rows = [];
  for (const s of services) {
    for (const r of s.rows) {
      const b = r.branch;
      const how = b ? (b.share ? `${b.chain} (numgen ${b.index} of ${r.branches}, share ${b.share})`
                               : `${b.chain} (probability ${b.probability === null ? "rest" : b.probability}, ${r.branches} branches)`)
                    : (r.error || "no branch to this pod");
      rows.push(el("tr", { "data-testid": "explain-packet", "data-node": r.node, "data-service": s.service,
                           "data-branch": b ? b.chain : "", "data-share": b ? (b.share || b.probability || "rest") : "" },
        el("td", {}, r.node), el("td", {}, `${s.service}${r.port ? ":" + r.port : ""}`),
        el("td", {}, r.entries.map((e) => `${e.kind} ${e.destination || "*"}:${e.port || "?"}/${e.protocol || "?"}`).join(", ")),
        el("td", {}, (r.chain || "") + (r.numgen ? ` · ${r.numgen} vmap` : "")),
        el("td", { class: b ? "" : "missing" }, how), el("td", {}, b ? b.destination || "?" : "")));
    }
  }
  return el("table", { class: "explain", "data-testid": "explain-packets" }, head, ...rows);
}

async function loadPod() {
  if (!state.pod) return;
  if (state.podBusy) { state.podAgain = true; return; }
  state.podBusy = true;
  try {
    const key = state.pod;
    const resp = await fetch(`/ui/v1/pod?name=${encodeURIComponent(key)}`, { cache: "no-store" });
    const target = document.getElementById("pod");
    if (key !== state.pod) return;
    if (resp.status === 404) { target.replaceChildren(el("h2", {}, `kubelab explain pod ${key}`), el("p", { class: "missing" }, "this pod does not exist (any more)")); return; }
    if (!resp.ok) throw new Error(`pod: ${resp.status}`);
    const data = await resp.json();
    target.replaceChildren(
      el("h2", { "data-testid": "explain-title" }, `kubelab explain pod ${key}` + (data.pod.node ? ` · on ${data.pod.node}` : "")),
      el("h3", {}, "Scheduling: every node's filters and scores"), explainTable(data.scheduling),
      el("h3", {}, "Packets to its Services: how each node handles them"), packetTable(data.services));
    target.dataset.loaded = key;
  } finally {
    state.podBusy = false;
    if (state.podAgain) { state.podAgain = false; loadPod(); }
  }
}

function selectPod(key) { state.pod = key; loadPod(); }

// --- nodes and their pods --------------------------------------------------------------------------

async function loadOverview() {
  const data = await getJSON("/ui/v1/overview");
  const cards = data.nodes.map((n) => el("div", { class: "node-card", "data-testid": "node", "data-node": n.name },
    el("h3", { class: n.ready ? "" : "notready" }, `${n.name}${n.ready ? "" : " (not ready)"}`),
    el("ul", {}, ...n.pods.slice(0, 50).map((p) => {
      const li = el("li", { "data-testid": "pod", "data-key": p.name, class: "pickable" + (p.ready ? "" : " notready") },
        `${p.name} ${p.ip || ""}${p.terminating ? " (terminating)" : ""}`);
      li.addEventListener("click", () => selectPod(p.name));
      return li;
    }),
      n.pods.length > 50 ? el("li", {}, `… ${n.pods.length - 50} more`) : null)));
  if (data.unscheduled.length) cards.push(el("div", { class: "node-card" }, el("h3", {}, "not scheduled"),
    el("ul", {}, ...data.unscheduled.slice(0, 50).map((p) => el("li", {}, p.name)))));
  document.getElementById("nodes").replaceChildren(...cards);
}

// --- live: the server's watch events, batched ------------------------------------------------------

function connect() {
  const source = new EventSource("/ui/v1/events");
  source.onopen = () => setStatus("live (watching Services, EndpointSlices, pods, nodes)");
  source.onerror = () => setStatus("reconnecting…");
  source.onmessage = (event) => {
    const change = JSON.parse(event.data);
    const kinds = new Set(change.kinds);
    if (kinds.has("services") || kinds.has("endpointslices")) loadServices();
    if (kinds.has("pods") || kinds.has("nodes")) loadOverview();
    // A node's rules changed (its agent's transaction landed: the server hears it from the kernel), or the
    // Service's objects did: the path is read again now, not on a timer.
    if (state.selected && (change.overflow || change.services.includes(state.selected) || change.nodes.length)) loadPath();
    if (state.selected && (change.overflow || change.services.includes(state.selected) || kinds.has("pods"))) loadTrace();
    if (state.pod && (change.nodes.length || kinds.has("pods") || kinds.has("endpointslices") || kinds.has("nodes"))) loadPod();
  };
  // Events missed while the stream was down: read everything shown again once it is back.
  source.addEventListener("open", () => { loadServices(); loadOverview(); loadPath(); loadPod(); });
}

document.getElementById("search").addEventListener("input", (e) => {
  state.query = e.target.value;
  clearTimeout(searchTimer);
  searchTimer = setTimeout(loadServices, 150);
});

loadServices();
loadOverview();
if (state.selected) { loadPath(); loadTrace(); }
connect();
