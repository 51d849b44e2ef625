// The operator dashboard: plain JavaScript on the daemon's own HTTP API (no build step, no CDN).
// Routes: #/ (groups) and #/group/<id> (members, assignments, rebalance timeline). Refreshes every 5 seconds.
"use strict";

const REFRESH_MS = 5000;
const view = document.getElementById("view");
const statusEl = document.getElementById("status");
let timer = null;

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  }[c]));
}

async function api(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err = new Error(body.error || resp.statusText);
    err.status = resp.status;
    throw err;
  }
  return body;
}

function fmtTime(ms) {
  if (ms === null || ms === undefined) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

function fmtDuration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

function badge(state) {
  return `<span class="badge ${esc(state)}">${esc(state)}</span>`;
}

function causeBadge(cause) {
  return `<span class="badge cause ${esc(cause)}">${esc(cause.replace(/_/g, " "))}</span>`;
}

function fmtAssignment(assignment) {
  if (assignment === null || assignment === undefined) return '<span class="muted">–</span>';
  const topics = Object.keys(assignment).sort();
  if (!topics.length) return '<span class="muted">none</span>';
  return topics.map((t) => `<code>${esc(t)}</code>: ${esc(assignment[t].join(", "))}`).join("<br>");
}

function shortId(id) {
  if (!id) return "–";
  return id.length > 28 ? `${id.slice(0, 12)}…${id.slice(-8)}` : id;
}

// ----------------------------------------------------------------------------------------------- groups page

async function renderGroups() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const state = params.get("state") || "";
  const query = new URLSearchParams({ limit: "1000" });
  if (state) query.set("state", state);
  const data = await api(`/v1/groups?${query}`);
  const all = state ? (await api("/v1/groups?limit=1000")).groups : data.groups;
  const counts = {};
  let members = 0;
  for (const g of all) {
    counts[g.state] = (counts[g.state] || 0) + 1;
    members += g.members;
  }
  const cards = [
    ["Groups", all.length],
    ["Members", members],
    ["Stable", counts.Stable || 0],
    ["Rebalancing", (counts.PreparingRebalance || 0) + (counts.CompletingRebalance || 0)],
    ["Empty", counts.Empty || 0],
  ].map(([l, n]) => `<div class="card"><div class="n">${n}</div><div class="l">${l}</div></div>`).join("");
  const states = ["", "Stable", "PreparingRebalance", "CompletingRebalance", "Empty"];
  const options = states.map((s) => `<option value="${s}"${s === state ? " selected" : ""}>${s || "all states"}</option>`);
  const rows = data.groups.map((g) => `
    <tr data-group="${esc(g.group_id)}">
      <td><a href="#/group/${encodeURIComponent(g.group_id)}">${esc(g.group_id)}</a></td>
      <td>${badge(g.state)}</td>
      <td>${esc(g.protocol_type || "–")}</td>
      <td>${esc(g.protocol || "–")}</td>
      <td class="num">${g.generation_id}</td>
      <td class="num">${g.members}</td>
    </tr>`).join("");
  view.dataset.view = "groups";
  view.innerHTML = `
    <h1>Consumer groups</h1>
    <div class="cards">${cards}</div>
    <div class="filters"><label for="state">State</label><select id="state">${options.join("")}</select></div>
    <table id="groups">
      <thead><tr><th>Group</th><th>State</th><th>Type</th><th>Protocol</th>
        <th class="num">Generation</th><th class="num">Members</th></tr></thead>
      <tbody>${rows || '<tr><td colspan="6" class="muted">No groups.</td></tr>'}</tbody>
    </table>`;
  document.getElementById("state").addEventListener("change", (e) => {
    location.hash = e.target.value ? `#/?state=${e.target.value}` : "#/";
  });
}

// ------------------------------------------------------------------------------------------------ group page

function timeline(rebalances) {
  if (!rebalances.length) return '<p class="muted">No rebalances recorded.</p>';
  const longest = Math.max(1, ...rebalances.map((r) => r.duration_ms ?? r.join_duration_ms ?? 0));
  const rows = rebalances.map((r) => {
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
  }).join("");
  return `<div class="legend"><span><i style="background:var(--join)"></i>join phase</span>
    <span><i style="background:var(--sync)"></i>sync phase</span>
    <span><i style="background:#f0c46c"></i>in progress / restarted</span></div>
    <div class="timeline" id="timeline">${rows}</div>`;
}

async function renderGroup(groupId) {
  const enc = encodeURIComponent(groupId);
  const [group, history, offsets] = await Promise.all([
    api(`/v1/groups/${enc}`),
    api(`/v1/groups/${enc}/rebalances?limit=50`).catch(() => ({ rebalances: [], total: 0 })),
    api(`/v1/groups/${enc}/offsets`).catch(() => ({ offsets: [] })),
  ]);
  const members = group.members.map((m) => `
    <tr data-member="${esc(m.member_id)}">
      <td class="mono" title="${esc(m.member_id)}">${esc(shortId(m.member_id))}${m.member_id === group.leader ? " <b>(leader)</b>" : ""}</td>
      <td>${esc(m.group_instance_id || "–")}</td>
      <td>${esc(m.client_id)}</td>
      <td>${esc(m.client_host)}</td>
      <td class="num">${fmtDuration(m.since_last_heartbeat_ms)}</td>
      <td class="num">${fmtDuration(m.session_timeout_ms)}</td>
      <td>${m.subscription ? m.subscription.map((t) => `<code>${esc(t)}</code>`).join(" ") : esc(m.protocols.join(", "))}</td>
      <td>${fmtAssignment(m.assignment)}</td>
    </tr>`).join("");
  const offsetRows = offsets.offsets.map((o) => `
    <tr><td><code>${esc(o.topic)}</code></td><td class="num">${o.partition}</td><td class="num">${o.offset}</td>
      <td>${fmtTime(o.commit_timestamp_ms)}</td></tr>`).join("");
  view.dataset.view = "group";
  view.innerHTML = `
    <p><a href="#/">← all groups</a></p>
    <h1>${esc(group.group_id)} ${badge(group.state)}</h1>
    <div class="panel kv">
      <div>Generation</div><div>${group.generation_id}</div>
      <div>Protocol</div><div>${esc(group.protocol_type || "–")} / ${esc(group.protocol || "–")}</div>
      <div>Leader</div><div class="mono">${esc(group.leader || "–")}</div>
      <div>State since</div><div>${fmtTime(group.state_since_ms)}</div>
      <div>Members</div><div>${group.members.length}</div>
    </div>
    <h2>Members and assignments</h2>
    <table id="members">
      <thead><tr><th>Member</th><th>Instance</th><th>Client</th><th>Host</th><th class="num">Last heartbeat</th>
        <th class="num">Session</th><th>Subscription</th><th>Assignment</th></tr></thead>
      <tbody>${members || '<tr><td colspan="8" class="muted">No members.</td></tr>'}</tbody>
    </table>
    <h2>Rebalance timeline <span class="muted">(${history.total} recorded, newest first)</span></h2>
    <div class="panel">${timeline(history.rebalances)}</div>
    <h2>Committed offsets</h2>
    <table id="offsets">
      <thead><tr><th>Topic</th><th class="num">Partition</th><th class="num">Offset</th><th>Committed</th></tr></thead>
      <tbody>${offsetRows || '<tr><td colspan="4" class="muted">No committed offsets.</td></tr>'}</tbody>
    </table>`;
}

// ----------------------------------------------------------------------------------------------------- router

async function render() {
  clearTimeout(timer);
  const hash = location.hash || "#/";
  try {
    const m = hash.match(/^#\/group\/([^?]+)/);
    if (m) {
      await renderGroup(decodeURIComponent(m[1]));
    } else {
      await renderGroups();
    }
    statusEl.textContent = `updated ${new Date().toLocaleTimeString()}`;
    statusEl.classList.remove("error");
  } catch (err) {
    statusEl.textContent = `error: ${err.message}`;
    statusEl.classList.add("error");
    if (err.status === 404) {
      view.dataset.view = "missing";
      view.innerHTML = `<p><a href="#/">← all groups</a></p><p class="error">${esc(err.message)}</p>`;
    }
  }
  view.dataset.ready = "1";
  timer = setTimeout(render, REFRESH_MS);
}

window.addEventListener("hashchange", render);
render();
