// The operator dashboard: plain JavaScript on the daemon's own HTTP API (no build step, no CDN).
//
// Routes: #/ (what needs attention, then every group with its lag and consumer status) and #/group/<id> (members,
// timeline, lag, consumer status and offsets per partition, actions, the group's audit), #/topics, #/audit (every
// admin action with its actor: principal, client id, host; GET /v1/audit), #/acls and #/users (listed, created and
// deleted with the token of the header box).
// Consumer status: Burrow's evaluation of the commits (GET /v1/groups/{group}/status, docs/consumer-status.md): a
// group is OK, WARN or ERR, a partition OK, WARN, STOP, STALL or REWIND; "–" before the group's first commit.
// Data refreshes every 5 s (``?refresh=<ms>`` in the page URL changes that) WITHOUT rebuilding the page: a route
// builds its skeleton once; a refresh only replaces the content of the regions whose HTML changed, and never
// touches the controls (filters, action forms, a plan being confirmed) or a region holding the focused element.
// Times: local time with its UTC offset everywhere (the header clock too), UTC in the tooltip.
// Actions (reset offsets, delete offsets, delete the group, remove a static member) ask for the API token (kept in
// sessionStorage), show what they will do, and need an explicit confirmation.
"use strict";

const REFRESH_MS = Number(new URLSearchParams(location.search).get("refresh")) || 5000;
const THRESHOLDS = ["flapping_per_hour", "stale_heartbeat_pct", "stuck_ms", "quiet_commits_ms"];
const view = document.getElementById("view");
const statusEl = document.getElementById("status");
const healthEl = document.getElementById("health");
const clockEl = document.getElementById("clock");
let timer = null;
let routeKey = null; // the route whose skeleton is on the page
let page = null; // that route's state (its regions, the last data)
let refreshes = 0;

// ----------------------------------------------------------------------------------------------------- helpers

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  }[c]));
}

function token() {
  return sessionStorage.getItem("kgc-token") || "";
}

async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  // The token goes on every request: reads need the viewer role when the daemon answers anonymous ones 401.
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err = new Error(data.error || resp.statusText);
    err.status = resp.status;
    err.body = data;
    throw err;
  }
  return data;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

function zoneLabel(d) {
  const off = -d.getTimezoneOffset();
  const sign = off < 0 ? "-" : "+";
  return `UTC${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
}

function localText(d) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} `
    + `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zoneLabel(d)}`;
}

function utcText(d) {
  return `${d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "")} UTC`;
}

// Every time on the page: local time with its offset; the UTC time in the tooltip and in datetime.
function fmtTime(ms) {
  if (ms === null || ms === undefined || ms < 0) return '<span class="muted">–</span>';
  const d = new Date(ms);
  return `<time datetime="${d.toISOString()}" title="${utcText(d)}">${localText(d)}</time>`;
}

function fmtDuration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  if (ms < 7200000) return `${(ms / 60000).toFixed(1)} min`;
  return `${(ms / 3600000).toFixed(1)} h`;
}

function fmtAge(ms, at) {
  if (ms === null || ms === undefined) return '<span class="muted">never</span>';
  return `<span title="${at ? utcText(new Date(at)) : ""}">${fmtDuration(ms)} ago</span>`;
}

function badge(state) {
  return `<span class="badge ${esc(state)}">${esc(state)}</span>`;
}

// The consumer status (OK/WARN/ERR for a group, OK/WARN/STOP/STALL/REWIND for a partition), with what it means.
const STATUS_MEANING = {
  OK: "keeping up (or catching up)",
  WARN: "advancing, but the lag grew at every commit of the window",
  ERR: "a partition is STOP, STALL or REWIND",
  STOP: "no commit for longer than the window spans, and messages are waiting",
  STALL: "commits, but the offset does not move while messages are waiting",
  REWIND: "the committed offset went back",
};

function statusBadge(status) {
  if (!status) return '<span class="muted" title="no commit evaluated yet">–</span>';
  return `<span class="badge status ${esc(status)}" data-status="${esc(status)}" title="${esc(STATUS_MEANING[status] || "")}">${esc(status)}</span>`;
}

function causeBadge(cause) {
  return `<span class="badge cause ${esc(cause)}">${esc(cause.replace(/_/g, " "))}</span>`;
}

function kindBadge(kind) {
  return `<span class="badge kind ${esc(kind)}">${esc(kind.replace(/_/g, " "))}</span>`;
}

function fmtAssignment(assignment) {
  if (assignment === null || assignment === undefined) return '<span class="muted">–</span>';
  const topics = Object.keys(assignment).sort();
  if (!topics.length || topics.every((t) => !assignment[t].length)) {
    return '<span class="muted">none</span>';
  }
  return topics.map((t) => `<code>${esc(t)}</code>: ${esc(assignment[t].join(", "))}`).join("<br>");
}

function shortId(id) {
  if (!id) return "–";
  return id.length > 28 ? `${id.slice(0, 12)}…${id.slice(-8)}` : id;
}

function hashParams() {
  return new URLSearchParams(location.hash.split("?")[1] || "");
}

function attentionQuery() {
  const params = hashParams();
  const q = new URLSearchParams();
  for (const name of THRESHOLDS) if (params.get(name)) q.set(name, params.get(name));
  return `/v1/attention?${q}`;
}

// Replace a region's content only when its HTML changed, and never under the user's focus.
function patch(el, html) {
  if (!el || el._html === html) return;
  if (el.contains(document.activeElement) && document.activeElement !== document.body) return;
  el.innerHTML = html;
  el._html = html;
}

function region(id) {
  return document.getElementById(id);
}

// ----------------------------------------------------------------------------------------------- header: health

function tickClock() {
  const now = new Date();
  clockEl.textContent = localText(now);
  clockEl.title = utcText(now);
}

async function refreshHealth() {
  let ready;
  try {
    const resp = await fetch("/readyz", { headers: { Accept: "application/json" } });
    ready = await resp.json().catch(() => ({ ready: false, detail: `HTTP ${resp.status}` }));
  } catch (err) {
    ready = { ready: false, detail: `daemon unreachable: ${err.message}` };
  }
  healthEl.className = `health ${ready.ready ? "ok" : "bad"}`;
  healthEl.dataset.ready = ready.ready ? "1" : "0";
  healthEl.textContent = ready.ready ? `Ready · ${ready.detail}` : `NOT READY · ${ready.detail}`;
}

// ------------------------------------------------------------------------------------------ needs attention list

function attentionList(items, withGroup = true) {
  if (!items.length) return '<p class="ok-text">Nothing needs attention.</p>';
  const rows = items.map((i) => `
    <tr data-kind="${esc(i.kind)}" data-attention-group="${esc(i.group_id)}">
      <td>${kindBadge(i.kind)}</td>
      ${withGroup ? `<td><a href="#/group/${encodeURIComponent(i.group_id)}">${esc(i.group_id)}</a></td>` : ""}
      <td class="mono" title="${esc(i.member_id || "")}">${esc(i.group_instance_id || shortId(i.member_id))}</td>
      <td>${esc(i.detail)}</td>
      <td>${fmtTime(i.since_ms)}</td>
    </tr>`).join("");
  return `<table class="attention"><thead><tr><th>What</th>${withGroup ? "<th>Group</th>" : ""}<th>Member</th>
    <th>Detail</th><th>Since</th></tr></thead><tbody>${rows}</tbody></table>`;
}

// ----------------------------------------------------------------------------------------------- groups page

function groupsSkeleton() {
  const state = hashParams().get("state") || "";
  const states = ["", "Stable", "PreparingRebalance", "CompletingRebalance", "Empty"];
  const options = states.map((s) => `<option value="${s}"${s === state ? " selected" : ""}>${s || "all states"}</option>`);
  view.dataset.view = "groups";
  view.innerHTML = `
    <h1>Needs attention</h1>
    <div class="panel" id="attention"></div>
    <h1>Consumer groups</h1>
    <div class="cards" id="cards"></div>
    <div class="filters"><label for="state">State</label><select id="state">${options.join("")}</select></div>
    <table id="groups">
      <thead><tr><th>Group</th><th>State</th><th>Type</th><th>Protocol</th>
        <th class="num">Generation</th><th class="num">Members</th><th class="num" title="rebalances started in the
        last hour (since the daemon started)">Rebalances/h</th><th>Last commit</th><th class="num" title="messages
        behind the log end, summed over the group's partitions">Lag</th><th class="num" title="the largest time lag
        of a partition: now minus the append time of its first unconsumed message">Time lag</th><th title="Burrow's
        evaluation of the group's last commits: OK, WARN (lag growing) or ERR (a partition stopped, stalled or
        rewound)">Status</th><th class="num">Issues</th></tr></thead>
      <tbody id="groups-body"></tbody>
    </table>`;
  region("state").addEventListener("change", (e) => {
    const params = hashParams();
    if (e.target.value) params.set("state", e.target.value); else params.delete("state");
    location.hash = `#/?${params}`;
  });
}

async function refreshGroups() {
  const state = hashParams().get("state") || "";
  const [list, attention, lag] = await Promise.all([
    api("/v1/groups?limit=1000"), api(attentionQuery()), api("/v1/lag").catch(() => ({ groups: [] })),
  ]);
  const lags = Object.fromEntries(lag.groups.map((l) => [l.group, l]));
  const all = list.groups;
  const counts = {};
  let members = 0;
  for (const g of all) {
    counts[g.state] = (counts[g.state] || 0) + 1;
    members += g.members;
  }
  patch(region("cards"), [
    ["Groups", all.length],
    ["Members", members],
    ["Stable", counts.Stable || 0],
    ["Rebalancing", (counts.PreparingRebalance || 0) + (counts.CompletingRebalance || 0)],
    ["Empty", counts.Empty || 0],
    ["Need attention", new Set(attention.items.map((i) => i.group_id)).size],
  ].map(([l, n]) => `<div class="card"><div class="n">${n}</div><div class="l">${l}</div></div>`).join(""));
  patch(region("attention"), attentionList(attention.items));
  const health = Object.fromEntries(attention.groups.map((h) => [h.group_id, h]));
  const issues = {};
  for (const i of attention.items) issues[i.group_id] = (issues[i.group_id] || 0) + 1;
  const shown = state ? all.filter((g) => g.state === state) : all;
  const rows = shown.map((g) => {
    const h = health[g.group_id] || {};
    const l = lags[g.group_id] || {};
    const flap = h.flapping ? ' <span class="badge kind flapping">flapping</span>' : "";
    return `
    <tr data-group="${esc(g.group_id)}">
      <td><a href="#/group/${encodeURIComponent(g.group_id)}">${esc(g.group_id)}</a></td>
      <td>${badge(g.state)}</td>
      <td>${esc(g.protocol_type || "–")}</td>
      <td>${esc(g.protocol || "–")}</td>
      <td class="num">${g.generation_id}</td>
      <td class="num">${g.members}</td>
      <td class="num rph">${h.rebalances_last_hour ?? "–"}${flap}</td>
      <td class="age">${fmtAge(h.last_commit_age_ms, h.last_commit_ms)}</td>
      <td class="num lag" data-lag="${l.total_lag ?? ""}">${l.max_lag !== null && l.max_lag !== undefined ? l.total_lag : "–"}</td>
      <td class="num time-lag" data-ms="${l.max_lag_ms ?? ""}">${fmtDuration(l.max_lag_ms)}</td>
      <td class="consumer-status" data-status="${esc(g.status || "")}">${statusBadge(g.status)}</td>
      <td class="num issues${issues[g.group_id] ? " warn" : ""}">${issues[g.group_id] || ""}</td>
    </tr>`;
  }).join("");
  patch(region("groups-body"), rows || '<tr><td colspan="12" class="muted">No groups.</td></tr>');
}

// ------------------------------------------------------------------------------------------------ group page

function timeline(rebalances, events) {
  if (!rebalances.length && !events.length) return '<p class="muted">No rebalances recorded.</p>';
  const longest = Math.max(1, ...rebalances.map((r) => r.duration_ms ?? r.join_duration_ms ?? 0));
  const entries = rebalances.map((r) => ({ at: r.started_ms, html: rebalanceRow(r, longest) }))
    .concat(events.map((e) => ({ at: e.timestamp_ms, html: markerRow(e) })));
  entries.sort((a, b) => b.at - a.at); // newest first (stable: rebalances keep their order)
  return `<div class="legend"><span><i style="background:var(--join)"></i>join phase</span>
    <span><i style="background:var(--sync)"></i>sync phase</span>
    <span><i style="background:#f0c46c"></i>in progress / restarted</span>
    <span><i class="dot join_refused"></i>refused join</span>
    <span><i class="dot static_replacement"></i>static replacement</span>
    <span><i class="dot group_deleted"></i>deleted / recreated</span></div>
    <div class="timeline" id="timeline">${entries.map((e) => e.html).join("")}</div>`;
}

function rebalanceRow(r, longest) {
  const join = r.join_duration_ms ?? 0;
  const sync = r.sync_duration_ms ?? 0;
  let bar;
  if (r.outcome === "in_progress" || r.outcome === "restarted") {
    bar = '<div class="open"></div>';
  } else {
    const jw = (100 * join) / longest;
    const sw = (100 * sync) / longest;
    bar = `<div class="join" style="width:${Math.max(jw, 0.5)}%"></div>`
      + `<div class="sync" style="left:${jw}%;width:${Math.max(sw, sync ? 0.5 : 0)}%"></div>`;
  }
  const moved = r.partitions_moved === null ? "–" : r.partitions_moved.length;
  const ins = r.members_in.map((m) => esc(m.client_id || shortId(m.member_id))).join(", ");
  const outs = r.members_out.map((m) => `${esc(m.group_instance_id || shortId(m.member_id))} (${esc(m.cause)})`).join(", ");
  const gen = `${r.from_generation} → ${r.to_generation ?? "?"}`;
  return `
      <div class="tl-row" data-cause="${esc(r.cause)}">
        <span class="mono">${fmtTime(r.started_ms)}</span>
        <span>${causeBadge(r.cause)}</span>
        <div class="tl-bar" title="join ${fmtDuration(r.join_duration_ms)}, sync ${fmtDuration(r.sync_duration_ms)}">${bar}</div>
        <span class="mono">${fmtDuration(r.duration_ms)}</span>
        <div class="tl-detail">generation ${gen} · ${esc(r.outcome)}${r.reason ? ` · “${esc(r.reason)}”` : ""}
          · join ${fmtDuration(r.join_duration_ms)} · sync ${fmtDuration(r.sync_duration_ms)}
          · partitions moved: ${moved}${ins ? ` · in: ${ins}` : ""}${outs ? ` · out: ${outs}` : ""}</div>
      </div>`;
}

function markerRow(e) {
  let who = "";
  if (e.kind === "join_refused") {
    who = ` · ${esc(e.error)} · client ${esc(e.client_id || "–")} ${esc(e.client_host || "")}`;
  } else if (e.kind === "static_replacement") {
    who = ` · ${esc(shortId(e.previous_member_id))} → ${esc(shortId(e.member_id))} (${esc(e.client_id || "")})`;
  }
  return `
      <div class="tl-mark" data-kind="${esc(e.kind)}" data-source="${esc(e.source)}">
        <span class="mono">${fmtTime(e.timestamp_ms)}</span>
        <span>${kindBadge(e.kind)}</span>
        <div class="tl-mdetail">${esc(e.detail)}${who}</div>
      </div>`;
}

function groupSkeleton(groupId) {
  view.dataset.view = "group";
  view.innerHTML = `
    <p><a href="#/">← all groups</a></p>
    <div id="g-head"></div>
    <div id="g-attention"></div>
    <h2>Members and assignments</h2>
    <table id="members">
      <thead><tr><th>Member</th><th>Instance</th><th>Client</th><th>Host</th><th class="num">Last heartbeat</th>
        <th class="num">Session</th><th>Subscription</th><th>Assignment</th></tr></thead>
      <tbody id="members-body"></tbody>
    </table>
    <h2>Rebalance timeline <span class="muted" id="tl-count"></span></h2>
    <div class="panel" id="g-timeline"></div>
    <h2>Lag and committed offsets <span class="muted" id="lag-total"></span></h2>
    <table id="offsets">
      <thead><tr><th>Topic</th><th class="num">Partition</th><th class="num">Offset</th>
        <th class="num" title="the high watermark: what consumers can read up to">Log end</th>
        <th class="num" title="log end minus the committed offset">Lag</th>
        <th class="num" title="now minus the append time of the first unconsumed message">Time lag</th>
        <th title="Burrow's evaluation of the partition's last commits">Status</th>
        <th>Owner</th><th>Committed</th></tr></thead>
      <tbody id="offsets-body"></tbody>
    </table>
    <h2>Admin actions on this group <span class="muted">(newest first)</span></h2>
    <table id="g-audit">${auditHead()}<tbody id="g-audit-body"></tbody></table>
    <h2>Actions</h2>
    ${actionsSkeleton()}`;
  wireActions(groupId);
}

// "2 of 4 partitions not OK (STOP 1, WARN 1) · windows 75% full": what the group status is made of.
function statusSummary(s) {
  const bad = {};
  for (const p of s.partitions) if (p.status !== "OK") bad[p.status] = (bad[p.status] || 0) + 1;
  const n = Object.values(bad).reduce((a, b) => a + b, 0);
  const which = Object.keys(bad).sort().map((k) => `${k} ${bad[k]}`).join(", ");
  return `<span class="muted">${n} of ${s.partition_count} partition(s) not OK${n ? ` (${esc(which)})` : ""}
    · windows ${Math.round(100 * s.complete)}% full · ${s.intervals} commits kept per partition</span>`;
}

async function refreshGroup(groupId) {
  const enc = encodeURIComponent(groupId);
  const [group, history, offsets, events, attention, status, audit] = await Promise.all([
    api(`/v1/groups/${enc}`),
    api(`/v1/groups/${enc}/rebalances?limit=50`).catch(() => ({ rebalances: [], total: 0 })),
    api(`/v1/groups/${enc}/offsets`).catch(() => ({ offsets: [] })),
    api(`/v1/groups/${enc}/events?limit=50`).catch(() => ({ events: [] })),
    api(attentionQuery()).catch(() => ({ items: [], groups: [] })),
    api(`/v1/groups/${enc}/status?all=true`).catch(() => null),
    api(`/v1/audit?group=${enc}&limit=20`).catch(() => ({ actions: [] })),
  ]);
  page.group = group;
  // The status before the group's first commit is "–" (the API says OK: nothing to judge yet).
  const judged = status && status.partition_count > 0 ? status : null;
  const statusOf = Object.fromEntries((judged ? judged.partitions : []).map((p) => [`${p.topic}/${p.partition}`, p]));
  page.offsets = offsets.offsets;
  const health = attention.groups.find((h) => h.group_id === groupId) || {};
  const stale = new Set(health.stale_members || []);
  const idle = new Set(health.members_without_partitions || []);
  patch(region("g-head"), `
    <h1>${esc(group.group_id)} ${badge(group.state)} <span id="g-status" data-status="${esc(judged ? judged.status : "")}">${judged ? statusBadge(judged.status) : ""}</span></h1>
    <div class="panel kv">
      <div>Generation</div><div>${group.generation_id}</div>
      <div>Protocol</div><div>${esc(group.protocol_type || "–")} / ${esc(group.protocol || "–")}</div>
      <div>Leader</div><div class="mono">${esc(group.leader || "–")}</div>
      <div>State since</div><div>${fmtTime(group.state_since_ms)}</div>
      <div>Members</div><div>${group.members.length}</div>
      <div>Rebalances/h</div><div>${health.rebalances_last_hour ?? "–"}${health.flapping ? " " + kindBadge("flapping") : ""}</div>
      <div>Last commit</div><div>${fmtAge(health.last_commit_age_ms, health.last_commit_ms)}${health.last_commit_ms ? ` (${fmtTime(health.last_commit_ms)})` : ""}</div>
      <div>Consumer status</div><div>${judged ? `${statusBadge(judged.status)} ${statusSummary(judged)}` : '<span class="muted">no commit to judge yet</span>'}</div>
    </div>`);
  const mine = attention.items.filter((i) => i.group_id === groupId);
  patch(region("g-attention"), mine.length ? `<div class="panel warn-panel"><h2>Needs attention</h2>${attentionList(mine, false)}</div>` : "");
  const members = group.members.map((m) => `
    <tr data-member="${esc(m.member_id)}">
      <td class="mono" title="${esc(m.member_id)}">${esc(shortId(m.member_id))}${m.member_id === group.leader ? " <b>(leader)</b>" : ""}</td>
      <td>${esc(m.group_instance_id || "–")}</td>
      <td>${esc(m.client_id)}</td>
      <td>${esc(m.client_host)}</td>
      <td class="num${stale.has(m.member_id) ? " stale" : ""}">${fmtDuration(m.since_last_heartbeat_ms)}${stale.has(m.member_id) ? ' <span class="badge kind stale_heartbeat">stale</span>' : ""}</td>
      <td class="num">${fmtDuration(m.session_timeout_ms)}</td>
      <td>${m.subscription ? m.subscription.map((t) => `<code>${esc(t)}</code>`).join(" ") : esc(m.protocols.join(", "))}</td>
      <td${idle.has(m.member_id) ? ' class="idle"' : ""}>${fmtAssignment(m.assignment)}${idle.has(m.member_id) ? ' <span class="badge kind no_partitions">owns no partitions</span>' : ""}</td>
    </tr>`).join("");
  patch(region("members-body"), members || '<tr><td colspan="8" class="muted">No members.</td></tr>');
  const refusals = events.events.filter((e) => e.source === "memory").length;
  patch(region("tl-count"), `(${history.total} rebalances recorded, newest first; ${events.events.length - refusals} stored events; ${refusals} refused joins since the daemon started)`);
  patch(region("g-timeline"), timeline(history.rebalances, events.events));
  // One row per partition the group committed or is assigned (the API's lag view: the same numbers as the CLI and
  // /metrics), with the member that owns it now; the commit time comes from the offsets.
  const byTp = Object.fromEntries(offsets.offsets.map((o) => [`${o.topic}/${o.partition}`, o]));
  const memberById = Object.fromEntries(group.members.map((m) => [m.member_id, m]));
  const lagRows = group.lag.partitions.map((p) => {
    const tp = `${p.topic}/${p.partition}`;
    const owner = p.member_id ? memberById[p.member_id] : null;
    const ownerCell = p.member_id
      ? `<span title="${esc(p.member_id)}">${esc(p.client_id)} <span class="mono muted">${esc((owner && owner.group_instance_id) || shortId(p.member_id))}</span></span>`
      : '<span class="muted">unowned</span>';
    const o = byTp[tp];
    const dash = '<span class="muted">–</span>';
    return `
    <tr data-tp="${esc(tp)}"><td><code>${esc(p.topic)}</code></td><td class="num">${p.partition}</td>
      <td class="num">${p.committed_offset ?? dash}</td><td class="num">${p.log_end_offset ?? dash}</td>
      <td class="num lag${p.lag ? " warn" : ""}" data-lag="${p.lag ?? ""}">${p.lag ?? dash}</td>
      <td class="num time-lag" data-ms="${p.lag_ms ?? ""}">${p.lag_ms === null ? dash : fmtDuration(p.lag_ms)}</td>
      <td class="consumer-status" data-status="${esc(statusOf[tp] ? statusOf[tp].status : "")}">${statusOf[tp] ? statusBadge(statusOf[tp].status) : dash}</td>
      <td class="owner" data-owner="${esc(p.member_id || "")}">${ownerCell}</td>
      <td>${o ? fmtTime(o.commit_timestamp_ms) : dash}</td></tr>`;
  }).join("");
  patch(region("lag-total"), group.lag.partitions.length
    ? `(${group.lag.total_lag} messages behind in total, at most ${fmtDuration(group.lag.max_lag_ms)})` : "");
  patch(region("offsets-body"), lagRows || '<tr><td colspan="9" class="muted">No committed offsets and no assigned partitions.</td></tr>');
  patch(region("g-audit-body"), auditRows(audit.actions, false));
  refreshActionChoices(group);
}

// ------------------------------------------------------------------------------------------------------ audit

function auditHead(withGroup = false) {
  return `<thead><tr><th>When</th><th>Via</th><th>Action</th>${withGroup ? "<th>On</th>" : ""}<th>Principal</th>
    <th>Client</th><th>Host</th><th>What</th></tr></thead>`;
}

function auditRows(actions, withGroup) {
  const cols = withGroup ? 8 : 7;
  if (!actions.length) return `<tr><td colspan="${cols}" class="muted">No admin action recorded.</td></tr>`;
  return actions.map((a) => `
    <tr data-action="${esc(a.action)}" data-principal="${esc(a.principal)}">
      <td>${fmtTime(a.timestamp_ms)}</td><td>${esc(a.via)}</td>
      <td><span class="badge kind">${esc(a.action)}</span></td>
      ${withGroup ? `<td>${a.group_id !== null ? `<a href="#/group/${encodeURIComponent(a.group_id)}">${esc(a.group_id)}</a>` : `<code>${esc(a.resource)}</code>`}</td>` : ""}
      <td class="principal"><strong>${esc(a.principal)}</strong></td>
      <td class="client">${esc(a.client_id || "–")}</td><td>${esc(a.client_host || "–")}</td>
      <td>${esc(a.detail)}</td></tr>`).join("");
}

function auditSkeleton() {
  view.dataset.view = "audit";
  view.innerHTML = `
    <h1>Admin actions <span class="muted" id="audit-count"></span></h1>
    <p class="muted">Every offset reset or alter, deletion, member removal, topic, ACL and user change, over this
      API and over the Kafka admin APIs, with who did it. Newest first.</p>
    <table id="audit">${auditHead(true)}<tbody id="audit-body"></tbody></table>`;
}

async function refreshAudit() {
  const data = await api("/v1/audit?limit=200");
  patch(region("audit-count"), `(${data.total})`);
  patch(region("audit-body"), auditRows(data.actions, true));
}

// ---------------------------------------------------------------------------------------------------- actions

const STRATEGIES = {
  "to-earliest": null, "to-latest": null, "to-current": null,
  "to-offset": ["to_offset", "offset, e.g. 0"],
  "shift-by": ["shift_by", "shift, e.g. -10"],
  "to-datetime": ["to_datetime", "ISO 8601 with a zone, e.g. 2026-01-01T00:00:00Z"],
  "by-duration": ["by_duration_ms", "milliseconds back, e.g. 3600000"],
};

function actionsSkeleton() {
  const strategies = Object.keys(STRATEGIES).map((s) => `<option value="${s}">${s}</option>`).join("");
  return `
    <div class="panel actions" id="actions">
      <div class="row"><label for="token">API token</label>
        <input id="token" type="password" autocomplete="off" placeholder="bearer token (kept for this tab only)">
        <span class="muted">Actions change the group: each shows what it will do and waits for a confirmation.</span></div>
      <fieldset id="act-reset"><legend>Reset offsets</legend>
        <div class="row"><label for="reset-strategy">Strategy</label><select id="reset-strategy">${strategies}</select>
          <input id="reset-value" placeholder="" disabled>
          <label for="reset-scope">Partitions</label>
          <input id="reset-scope" value="all" title='"all": every committed partition; or topic or topic:0,1,2 (several separated by spaces)'>
          <button id="reset-plan-btn" type="button">Dry run</button></div>
        <div id="reset-plan" class="plan"></div>
      </fieldset>
      <fieldset id="act-delete-offsets"><legend>Delete committed offsets</legend>
        <div class="row"><label for="del-offsets-scope">Partitions</label>
          <input id="del-offsets-scope" placeholder="topic or topic:0,1">
          <button id="del-offsets-btn" type="button">Show what will be deleted</button></div>
        <div id="del-offsets-plan" class="plan"></div>
      </fieldset>
      <fieldset id="act-remove-member"><legend>Remove a static member</legend>
        <div class="row"><label for="member-select">Member</label><select id="member-select"></select>
          <button id="remove-member-btn" type="button">Show what will be removed</button></div>
        <div id="remove-member-plan" class="plan"></div>
      </fieldset>
      <fieldset id="act-delete-group"><legend>Delete the group</legend>
        <div class="row"><button id="delete-group-btn" type="button">Show what will be deleted</button></div>
        <div id="delete-group-plan" class="plan"></div>
      </fieldset>
    </div>`;
}

// "all" or "topic topic:0,1" -> the API's topics selection
function parseScope(text) {
  const t = text.trim();
  if (!t || t === "all") return "all";
  return t.split(/\s+/).map((part) => {
    const [topic, parts] = part.split(":");
    const sel = { topic };
    if (parts) sel.partitions = parts.split(",").filter(Boolean).map(Number);
    return sel;
  });
}

function errorText(err) {
  return `<p class="error" data-status="${err.status || ""}">${err.status ? `HTTP ${err.status}: ` : ""}${esc(err.message)}</p>`;
}

// A plan area: what the action will do, then Confirm / Cancel. Confirm runs ``execute`` once.
function showPlan(el, html, confirmLabel, execute) {
  el.innerHTML = `${html}<div class="row"><button type="button" class="danger confirm">${esc(confirmLabel)}</button>
    <button type="button" class="cancel">Cancel</button></div>`;
  el.querySelector(".cancel").addEventListener("click", () => { el.innerHTML = ""; });
  el.querySelector(".confirm").addEventListener("click", async (e) => {
    e.target.disabled = true;
    try {
      el.innerHTML = await execute();
      refreshSoon();
    } catch (err) {
      el.innerHTML = errorText(err);
    }
  });
}

function planTable(partitions) {
  const rows = partitions.map((p) => `<tr data-tp="${esc(p.topic)}/${p.partition}"><td><code>${esc(p.topic)}</code></td>
    <td class="num">${p.partition}</td><td class="num">${p.current_offset ?? "–"}</td><td class="num">${p.new_offset}</td></tr>`);
  return `<table class="plan-table"><thead><tr><th>Topic</th><th class="num">Partition</th><th class="num">Current</th>
    <th class="num">New</th></tr></thead><tbody>${rows.join("") || '<tr><td colspan="4" class="muted">No partitions.</td></tr>'}</tbody></table>`;
}

function wireActions(groupId) {
  const enc = encodeURIComponent(groupId);
  const tokenInput = region("token");
  tokenInput.value = token();
  tokenInput.addEventListener("input", () => {
    sessionStorage.setItem("kgc-token", tokenInput.value);
    document.getElementById("header-token").value = tokenInput.value;
  });

  const strategy = region("reset-strategy");
  const value = region("reset-value");
  strategy.addEventListener("change", () => {
    const spec = STRATEGIES[strategy.value];
    value.disabled = !spec;
    value.placeholder = spec ? spec[1] : "";
    region("reset-plan").innerHTML = "";
  });
  region("reset-plan-btn").addEventListener("click", async () => {
    const plan = region("reset-plan");
    const spec = STRATEGIES[strategy.value];
    const body = { strategy: strategy.value, topics: parseScope(region("reset-scope").value) };
    if (spec) body[spec[0]] = spec[0] === "to_datetime" ? value.value.trim() : Number(value.value);
    plan.innerHTML = '<p class="muted">Planning…</p>';
    try {
      const dry = await api(`/v1/groups/${enc}/offsets/reset`, { method: "POST", body: { ...body, execute: false } });
      showPlan(plan, `<p>Dry run of <b>${esc(dry.strategy)}</b>: nothing has changed yet. Executing writes these
        offsets for group <b>${esc(groupId)}</b>:</p>${planTable(dry.partitions)}`, "Execute this reset", async () => {
        const done = await api(`/v1/groups/${enc}/offsets/reset`, { method: "POST", body: { ...body, execute: true } });
        return `<p class="ok-text" data-done="reset">Offsets reset on ${done.partitions.length} partition(s).</p>${planTable(done.partitions)}`;
      });
    } catch (err) {
      plan.innerHTML = errorText(err);
    }
  });

  region("del-offsets-btn").addEventListener("click", () => {
    const plan = region("del-offsets-plan");
    const scope = parseScope(region("del-offsets-scope").value);
    if (scope === "all") {
      plan.innerHTML = '<p class="error">Name the topic (and optionally its partitions) whose offsets to delete.</p>';
      return;
    }
    const wanted = (o) => scope.some((s) => s.topic === o.topic && (!s.partitions || s.partitions.includes(o.partition)));
    const hit = (page.offsets || []).filter(wanted);
    const rows = hit.map((o) => ({ topic: o.topic, partition: o.partition, current_offset: o.offset, new_offset: "deleted" }));
    showPlan(plan, `<p>Deletes these committed offsets of group <b>${esc(groupId)}</b> (its consumers then start from
      their auto.offset.reset):</p>${planTable(rows)}`, "Delete these offsets", async () => {
      const done = await api(`/v1/groups/${enc}/offsets`, { method: "DELETE", body: { topics: scope } });
      const lines = done.partitions.map((p) => `<li>${esc(p.topic)}:${p.partition} ${p.error ? `<span class="error">${esc(p.error)}</span>` : "deleted"}</li>`);
      return `<p class="ok-text" data-done="delete-offsets">Answer per partition:</p><ul>${lines.join("")}</ul>`;
    });
  });

  region("remove-member-btn").addEventListener("click", () => {
    const plan = region("remove-member-plan");
    const instance = region("member-select").value;
    if (!instance) {
      plan.innerHTML = '<p class="muted">The group has no static member (group.instance.id).</p>';
      return;
    }
    const m = (page.group.members || []).find((x) => x.group_instance_id === instance);
    showPlan(plan, `<p>Removes static member <b>${esc(instance)}</b>${m ? ` (member ${esc(shortId(m.member_id))}, client
      ${esc(m.client_id)} at ${esc(m.client_host)})` : ""} from group <b>${esc(groupId)}</b>: the group rebalances
      (cause admin_action).</p>`, "Remove this member", async () => {
      await api(`/v1/groups/${enc}/members/${encodeURIComponent(instance)}`, { method: "DELETE" });
      return `<p class="ok-text" data-done="remove-member">Member ${esc(instance)} removed.</p>`;
    });
  });

  region("delete-group-btn").addEventListener("click", () => {
    const plan = region("delete-group-plan");
    const g = page.group;
    const n = (page.offsets || []).length;
    showPlan(plan, `<p>Deletes group <b>${esc(groupId)}</b> (${esc(g.state)}, ${g.members.length} member(s)) and its
      ${n} committed offset(s). Only an Empty group can be deleted.</p>`, "Delete this group", async () => {
      deletedGroup = groupId; // a refresh answered 404 from now on says so instead of "unknown group"
      try {
        await api(`/v1/groups/${enc}`, { method: "DELETE" });
      } catch (err) {
        deletedGroup = null;
        throw err;
      }
      return deletedText(groupId);
    });
  });
}

// The group deleted from its page: its page then answers 404, which shows this instead of "unknown group".
let deletedGroup = null;

function deletedText(groupId) {
  return `<p class="ok-text" data-done="delete-group">Group ${esc(groupId)} deleted. <a href="#/">All groups</a></p>`;
}

// The static members' choice follows the group, keeping the selection.
function refreshActionChoices(group) {
  const select = region("member-select");
  // Left alone while in use, once it has its choices (a first fill comes even under the focus).
  if (!select || (select === document.activeElement && select._html !== undefined)) return;
  const instances = group.members.map((m) => m.group_instance_id).filter(Boolean).sort();
  const html = instances.map((i) => `<option value="${esc(i)}">${esc(i)}</option>`).join("")
    || '<option value="">(no static members)</option>';
  if (select._html === html) return;
  const chosen = select.value;
  select.innerHTML = html;
  select._html = html;
  if (instances.includes(chosen)) select.value = chosen;
}

// ------------------------------------------------------------------------------------------------ topics page

function fmtBytes(n) {
  if (n === undefined || n === null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

function fmtPeriod(ms) {
  // retention periods are set in whole days, hours or minutes: say them so (7 d, not 168.0 h)
  for (const [unit, size] of [["d", 86400000], ["h", 3600000], ["min", 60000]]) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}`;
  }
  return fmtDuration(ms);
}

function fmtRetention(configs, own) {
  const ms = configs["retention.ms"];
  const bytes = configs["retention.bytes"];
  const time = ms === undefined ? "–" : ms === "-1" ? "forever" : fmtPeriod(Number(ms));
  const size = bytes === undefined || Number(bytes) < 0 ? "no size limit" : fmtBytes(Number(bytes));
  const mark = (key) => (key in own ? ' <span class="muted" title="set on the topic">(topic)</span>' : "");
  return `${esc(time)}${mark("retention.ms")} · ${esc(size)}${mark("retention.bytes")}`;
}

function topicsSkeleton() {
  view.dataset.view = "topics";
  view.innerHTML = `
    <h1>Topics</h1>
    <div class="cards" id="topic-cards"></div>
    <table id="topics">
      <thead><tr><th>Topic</th><th class="num">Partition</th><th class="num" title="the first offset a consumer
        can read (moved by retention and DeleteRecords)">Log start</th><th class="num" title="the high watermark">Log
        end</th><th class="num">Records</th><th class="num">Bytes</th><th>Retention (time · size)</th>
        <th>Cleanup</th></tr></thead>
      <tbody id="topics-body"></tbody>
    </table>`;
}

async function refreshTopics() {
  const data = await api("/v1/topics");
  const topics = data.topics;
  let bytes = 0;
  let partitions = 0;
  for (const t of topics) {
    bytes += t.size_bytes || 0;
    partitions += t.partitions;
  }
  patch(region("topic-cards"), [
    ["Topics", topics.length],
    ["Partitions", partitions],
    ["Stored", fmtBytes(bytes)],
  ].map(([l, n]) => `<div class="card"><div class="n">${n}</div><div class="l">${l}</div></div>`).join(""));
  const rows = topics.map((t) => {
    const configs = t.configs || {};
    const own = t.own_configs || {};
    const log = t.log && t.log.length ? t.log : [{ partition: null }];
    const internal = t.internal ? ' <span class="badge kind">internal</span>' : "";
    return log.map((p, i) => `
    <tr data-topic="${esc(t.name)}" data-partition="${p.partition ?? ""}">
      <td>${i === 0 ? `<strong>${esc(t.name)}</strong>${internal}` : ""}</td>
      <td class="num">${p.partition ?? "–"}</td>
      <td class="num log-start">${p.log_start_offset ?? "–"}</td>
      <td class="num log-end">${p.log_end_offset ?? "–"}</td>
      <td class="num">${p.log_end_offset === undefined ? "–" : p.log_end_offset - p.log_start_offset}</td>
      <td class="num bytes" title="${p.size_bytes ?? ""} bytes">${fmtBytes(p.size_bytes)}</td>
      <td class="retention">${i === 0 ? fmtRetention(configs, own) : ""}</td>
      <td>${i === 0 ? esc(configs["cleanup.policy"] || "–") : ""}</td>
    </tr>`).join("");
  }).join("");
  patch(region("topics-body"), rows || '<tr><td colspan="8" class="muted">No topics.</td></tr>');
}

// ------------------------------------------------------------------------------------------ ACLs and users
// #/acls lists the ACLs (GET /v1/acls, viewer) and #/users the SCRAM users (GET /v1/users, viewer: names and
// mechanisms, never a salt or key). Creating and deleting go through POST/DELETE /v1/acls and PUT/DELETE
// /v1/users/<name> with the token of the header box (admin role); like the group actions, each shows what it will do
// and waits for a confirmation, and each is an audited admin action.

const ACL_RESOURCES = ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"];
const ACL_OPERATIONS = ["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
  "IDEMPOTENT_WRITE", "CLUSTER_ACTION", "ALL"];
const ACL_FIELDS = ["resource_type", "pattern_type", "resource_name", "principal", "host", "operation", "permission"];

function options(values, chosen) {
  return values.map((v) => `<option value="${esc(v)}"${v === chosen ? " selected" : ""}>${esc(v)}</option>`).join("");
}

function aclText(a) {
  return `${a.permission} ${a.principal} ${a.operation} from ${a.host} on ${a.resource_type}:${a.pattern_type}:${a.resource_name}`;
}

function aclsSkeleton() {
  view.dataset.view = "acls";
  view.innerHTML = `
    <h1>ACLs <span class="muted" id="acls-count"></span></h1>
    <p class="muted" id="acls-state"></p>
    <table id="acls"><thead><tr><th>Resource</th><th>Pattern</th><th>Name</th><th>Principal</th><th>Host</th>
      <th>Operation</th><th>Permission</th><th></th></tr></thead><tbody id="acls-body"></tbody></table>
    <div id="acl-delete-plan" class="plan"></div>
    <div class="panel actions">
      <fieldset id="act-create-acl"><legend>Create an ACL</legend>
        <div class="row">
          <label for="acl-resource_type">Resource</label><select id="acl-resource_type">${options(ACL_RESOURCES, "GROUP")}</select>
          <select id="acl-pattern_type" title="LITERAL: this name (* is every one); PREFIXED: every name starting with it">${options(["LITERAL", "PREFIXED"], "LITERAL")}</select>
          <input id="acl-resource_name" placeholder="name, or *" size="18">
        </div>
        <div class="row">
          <label for="acl-principal">Principal</label><input id="acl-principal" placeholder="User:alice" size="18">
          <label for="acl-host">Host</label><input id="acl-host" value="*" size="10">
          <select id="acl-operation">${options(ACL_OPERATIONS, "READ")}</select>
          <select id="acl-permission">${options(["ALLOW", "DENY"], "ALLOW")}</select>
          <button id="acl-create-btn" type="button">Show what will be created</button>
        </div>
        <div id="acl-create-plan" class="plan"></div>
      </fieldset>
    </div>`;
  region("acls-body").addEventListener("click", (e) => {
    const button = e.target.closest("button[data-acl]");
    if (!button) return;
    const a = page.acls[Number(button.dataset.acl)];
    if (!a) return;
    const q = new URLSearchParams(ACL_FIELDS.map((f) => [f, a[f]]));
    showPlan(region("acl-delete-plan"), `<p>Deletes the ACL <b>${esc(aclText(a))}</b>: it stops applying at once, on
      every open connection.</p>`, "Delete this ACL", async () => {
      const done = await api(`/v1/acls?${q}`, { method: "DELETE" });
      return `<p class="ok-text" data-done="delete-acl">${done.acls.length} ACL(s) deleted.</p>`;
    });
  });
  region("acl-create-btn").addEventListener("click", () => {
    const acl = Object.fromEntries(ACL_FIELDS.map((f) => [f, region(`acl-${f}`).value.trim()]));
    const plan = region("acl-create-plan");
    if (!acl.resource_name || !acl.principal) {
      plan.innerHTML = '<p class="error">Name the resource (or *) and the principal (User:name, or User:*).</p>';
      return;
    }
    showPlan(plan, `<p>Creates the ACL <b>${esc(aclText(acl))}</b>: it applies at once, on every open
      connection.</p>`, "Create this ACL", async () => {
      const done = await api("/v1/acls", { method: "POST", body: { acls: [acl] } });
      return `<p class="ok-text" data-done="create-acl">${done.acls.length ? "ACL created." : "The ACL existed already."}</p>`;
    });
  });
}

async function refreshAcls() {
  const data = await api("/v1/acls");
  page.acls = data.acls;
  patch(region("acls-count"), `(${data.acls.length})`);
  patch(region("acls-state"), data.enabled
    ? "The authorizer is on: every Kafka request is checked against these ACLs."
    : "The authorizer is off (authorizer.enabled=false): no ACL is checked, and none can be created.");
  const rows = data.acls.map((a, i) => `
    <tr data-acl="${esc(aclText(a))}">
      <td>${esc(a.resource_type)}</td><td>${esc(a.pattern_type)}</td><td><code>${esc(a.resource_name)}</code></td>
      <td class="principal"><strong>${esc(a.principal)}</strong></td><td>${esc(a.host)}</td>
      <td>${esc(a.operation)}</td><td><span class="badge ${a.permission === "DENY" ? "Dead" : "Stable"}">${esc(a.permission)}</span></td>
      <td><button type="button" data-acl="${i}">Delete…</button></td></tr>`);
  patch(region("acls-body"), rows.join("") || '<tr><td colspan="8" class="muted">No ACL.</td></tr>');
}

function usersSkeleton() {
  view.dataset.view = "users";
  view.innerHTML = `
    <h1>Users <span class="muted" id="users-count"></span></h1>
    <p class="muted">SCRAM credentials (SASL SCRAM-SHA-256/512, and PLAIN against the same). Only the mechanisms are
      shown: the daemon keeps salted keys, never a password.</p>
    <table id="users"><thead><tr><th>User</th><th>Mechanisms (iterations)</th><th></th></tr></thead>
      <tbody id="users-body"></tbody></table>
    <div id="user-delete-plan" class="plan"></div>
    <div class="panel actions">
      <fieldset id="act-set-user"><legend>Create a user or set a password</legend>
        <div class="row">
          <label for="user-name">User</label><input id="user-name" placeholder="alice" size="16">
          <select id="user-mechanism">${options(["SCRAM-SHA-512", "SCRAM-SHA-256"], "SCRAM-SHA-512")}</select>
          <label for="user-password">Password</label><input id="user-password" type="password" autocomplete="new-password" size="16">
          <button id="user-set-btn" type="button">Show what will be done</button>
        </div>
        <div id="user-set-plan" class="plan"></div>
      </fieldset>
    </div>`;
  region("users-body").addEventListener("click", (e) => {
    const button = e.target.closest("button[data-user]");
    if (!button) return;
    const name = button.dataset.user;
    showPlan(region("user-delete-plan"), `<p>Deletes every SCRAM credential of <b>${esc(name)}</b>: it cannot
      authenticate again (open connections stay until they re-authenticate).</p>`, "Delete this user", async () => {
      const done = await api(`/v1/users/${encodeURIComponent(name)}`, { method: "DELETE" });
      return `<p class="ok-text" data-done="delete-user">${esc(done.name)}: ${esc(done.deleted.join(", "))} deleted.</p>`;
    });
  });
  region("user-set-btn").addEventListener("click", () => {
    const name = region("user-name").value.trim();
    const mechanism = region("user-mechanism").value;
    const password = region("user-password").value;
    const plan = region("user-set-plan");
    if (!name || !password) {
      plan.innerHTML = '<p class="error">Give the user name and the password.</p>';
      return;
    }
    const known = (page.users || []).some((u) => u.name === name);
    showPlan(plan, `<p>${known ? "Sets a new" : "Creates user"} <b>${esc(name)}</b>${known ? "'s" : " with a"}
      ${esc(mechanism)} password (salted by the daemon; the password is not kept).</p>`, known ? "Set the password" : "Create this user", async () => {
      await api(`/v1/users/${encodeURIComponent(name)}`, { method: "PUT", body: { password, mechanism } });
      region("user-password").value = "";
      return `<p class="ok-text" data-done="set-user">${esc(mechanism)} credential of ${esc(name)} stored.</p>`;
    });
  });
}

async function refreshUsers() {
  const data = await api("/v1/users");
  page.users = data.users;
  patch(region("users-count"), `(${data.users.length})`);
  const rows = data.users.map((u) => `
    <tr data-user="${esc(u.name)}"><td><strong>${esc(u.name)}</strong></td>
      <td>${u.credentials.map((c) => `${esc(c.mechanism)} (${c.iterations})`).join(", ")}</td>
      <td><button type="button" data-user="${esc(u.name)}">Delete…</button></td></tr>`);
  patch(region("users-body"), rows.join("") || '<tr><td colspan="3" class="muted">No user.</td></tr>');
}

// ----------------------------------------------------------------------------------------------------- router

function currentRoute() {
  const hash = location.hash || "#/";
  if (/^#\/topics\b/.test(hash)) return { key: "topics", group: null, topics: true };
  if (/^#\/audit\b/.test(hash)) return { key: "audit", group: null, audit: true };
  if (/^#\/acls\b/.test(hash)) return { key: "acls", group: null, acls: true };
  if (/^#\/users\b/.test(hash)) return { key: "users", group: null, users: true };
  const m = hash.match(/^#\/group\/([^?]+)/);
  return m ? { key: `group:${m[1]}`, group: decodeURIComponent(m[1]) } : { key: `groups:${hash}`, group: null };
}

async function refresh() {
  clearTimeout(timer);
  const route = currentRoute();
  try {
    if (route.key !== routeKey) {
      routeKey = route.key;
      page = {};
      if (route.topics) topicsSkeleton();
      else if (route.audit) auditSkeleton();
      else if (route.acls) aclsSkeleton();
      else if (route.users) usersSkeleton();
      else if (route.group !== null) groupSkeleton(route.group);
      else groupsSkeleton();
    }
    await Promise.all([
      route.topics ? refreshTopics() : route.audit ? refreshAudit() : route.acls ? refreshAcls()
        : route.users ? refreshUsers() : route.group !== null ? refreshGroup(route.group) : refreshGroups(),
      refreshHealth(),
    ]);
    statusEl.innerHTML = `updated ${fmtTime(Date.now())}`;
    statusEl.classList.remove("error");
  } catch (err) {
    statusEl.textContent = `error: ${err.message}`;
    statusEl.classList.add("error");
    if (err.status === 404 && route.group !== null) {
      routeKey = null;
      view.dataset.view = "missing";
      view.innerHTML = route.group === deletedGroup ? deletedText(route.group)
        : `<p><a href="#/">← all groups</a></p><p class="error">${esc(err.message)}</p>`;
    }
  }
  refreshes += 1;
  view.dataset.refreshes = String(refreshes);
  view.dataset.route = routeKey || "";
  view.dataset.ready = "1";
  timer = setTimeout(refresh, REFRESH_MS);
}

function refreshSoon() {
  clearTimeout(timer);
  timer = setTimeout(refresh, 200);
}

window.addEventListener("hashchange", refresh);
const headerToken = document.getElementById("header-token");
headerToken.value = token();
headerToken.addEventListener("input", () => {
  sessionStorage.setItem("kgc-token", headerToken.value);
  const form = document.getElementById("token");
  if (form) form.value = headerToken.value;
  refreshSoon();
});
tickClock();
setInterval(tickClock, 1000);
refresh();
