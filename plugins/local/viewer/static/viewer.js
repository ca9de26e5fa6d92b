// The rlhost trace viewer: hash routes #/ (list), #/t/<trace id>, #/compare?sample=&validate=&a=&b=
// (a sample across steps: validation steps, or a training row across epochs),
// #/group?step=&sample=&validate= (the n rollouts of one prompt at one step).
// Comparisons are offered only where the store has a counterpart (sample_steps, group_size).
"use strict";
const app = document.getElementById("app");
const esc = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const fmt = x => (typeof x === "number" && !Number.isInteger(x)) ? x.toFixed(3) : String(x);

async function api(path) {
  const r = await fetch(path);
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

function params() {
  const h = location.hash.replace(/^#/, "");
  const i = h.indexOf("?");
  return [i < 0 ? h : h.slice(0, i), new URLSearchParams(i < 0 ? "" : h.slice(i + 1))];
}

async function route() {
  const [path, q] = params();
  try {
    if (path.startsWith("/t/")) await showTrajectory(decodeURIComponent(path.slice(3)));
    else if (path === "/compare") await showCompare(q);
    else if (path === "/group") await showGroup(q);
    else if (path === "/runs") await showRuns(q);
    else await showList(q);
  } catch (e) {
    app.innerHTML = `<p class="err-banner" id="error">${esc(e.message)}</p>`;
  }
}

const rewardClass = r => r > 0 ? "reward-1" : "reward-0";
const fmtAdv = a => a === null || a === undefined ? "" : (a > 0 ? "+" : "") + fmt(a);

// The comparisons a trajectory has counterparts for: the same sample at other steps (a
// training row comes back once per epoch), and the other rollouts of its group.
function counterpartLinks(t) {
  const l = [];
  if (t.sample_steps > 1) l.push(`<a class="compare-link" href="#/compare?sample=${t.sample_index}&validate=${t.validate}">${t.validate ? "compare steps" : "compare epochs"} (${t.sample_steps})</a>`);
  if (t.group_size > 1) l.push(`<a class="group-link" href="#/group?step=${t.step}&sample=${t.sample_index}&validate=${t.validate}">group of ${t.group_size}</a>`);
  return l.join(" · ");
}

const FILTERS = [["step", "step", "3 or 2-5"], ["sample", "sample", "index"], ["rollout", "rollout", "n"], ["reward", "reward", "1 or 0.5-"]];

async function showList(q) {
  const summary = await api("/api/summary");
  document.getElementById("store").textContent = summary.store;
  const qs = new URLSearchParams();
  for (const [k] of FILTERS) if (q.get(k)) qs.set(k, q.get(k));
  if (q.get("validate")) qs.set("validate", q.get("validate"));
  qs.set("limit", "500");
  const data = await api("/api/trajectories?" + qs);
  const steps = summary.steps.map(s => `<span>step ${s.step}${s.validate ? " (val)" : ""}: ${s.trajectories} traj, reward ${fmt(s.mean_reward)}</span>`).join("");
  app.innerHTML = `
  <form class="filters" id="filters">
    ${FILTERS.map(([k, label, ph]) => `<label>${label}<input name="${k}" id="f-${k}" placeholder="${ph}" value="${esc(q.get(k) || "")}"></label>`).join("")}
    <label>validate<select name="validate" id="f-validate">
      ${["", "false", "true"].map(v => `<option value="${v}" ${q.get("validate") === v ? "selected" : ""}>${v || "any"}</option>`).join("")}
    </select></label>
    <button type="submit" id="apply">Filter</button>
  </form>
  ${summary.against ? `<p><a id="to-runs" href="#/runs">compare this run's validation with ${esc(summary.against)}</a></p>` : ""}
  <div class="summary">${steps}</div>
  <div id="count">${data.items.length} of ${data.total} trajectories</div>
  <table id="list"><thead><tr><th>trace</th><th>step</th><th>sample</th><th>rollout</th><th>validate</th><th>reward</th><th>advantage</th><th title="assistant turns: generate calls">assistant turns</th><th>response tokens</th><th>seconds</th><th>error</th><th></th></tr></thead>
  <tbody>${data.items.map(t => `<tr class="row" data-id="${esc(t.trace_id)}">
    <td><a href="#/t/${esc(t.trace_id)}">${esc(t.trace_id.slice(0, 12))}</a></td><td class="num">${t.step}</td><td class="num">${t.sample_index}</td>
    <td class="num">${t.rollout_n}</td><td>${t.validate}</td><td class="num ${rewardClass(t.reward)}">${fmt(t.reward)}</td>
    <td class="num">${fmtAdv(t.advantage)}</td><td class="num">${t.turns}</td><td class="num">${t.response_tokens}</td><td class="num">${((t.end_unix_nano - t.start_unix_nano) / 1e9).toFixed(2)}</td>
    <td>${esc((t.error || "").slice(0, 60))}</td>
    <td class="links">${counterpartLinks(t)}</td></tr>`).join("")}</tbody></table>`;
  document.getElementById("filters").onsubmit = ev => {
    ev.preventDefault();
    const f = new URLSearchParams();
    for (const [k, v] of new FormData(ev.target)) if (v) f.set(k, v);
    location.hash = "#/?" + f;
  };
  for (const tr of document.querySelectorAll("tr.row")) {
    tr.onclick = ev => { if (ev.target.tagName !== "A") location.hash = "#/t/" + tr.dataset.id; };
  }
}

async function showTrajectory(id) {
  const d = await api("/api/trajectory/" + encodeURIComponent(id));
  const t = d.trajectory;
  const msgs = d.chat.map(m => {
    const attrs = Object.entries(m.attributes || {}).map(([k, v]) => `${k}=${fmt(v)}`).join(" ");
    const dur = (m.role === "user" || m.role === "context") ? "" : ` · ${m.duration_ms.toFixed(1)} ms`;
    return `<div class="msg ${esc(m.role)} ${m.error ? "error" : ""}">
      <div class="role">${esc(m.role)}${m.name ? " · " + esc(m.name) : ""}${dur}${attrs ? " · " + esc(attrs) : ""}</div>
      ${m.arguments ? `<div class="args">arguments: ${esc(m.arguments)}</div>` : ""}<div class="content">${esc(m.content)}</div>
      ${m.error ? `<div class="err">error: ${esc(m.error)}</div>` : ""}</div>`;
  }).join("");
  const across = t.sample_steps > 1 ? ` · <a id="to-compare" href="#/compare?sample=${t.sample_index}&validate=${t.validate}">compare sample ${t.sample_index} across ${t.validate ? "steps" : "epochs"} (${t.sample_steps})</a>` : "";
  const group = t.group_size > 1 ? ` · <a id="to-group" href="#/group?step=${t.step}&sample=${t.sample_index}&validate=${t.validate}">its group of ${t.group_size} rollouts</a>` : "";
  app.innerHTML = `<p><a href="#/">← all trajectories</a>${across}${group}</p>
  <div class="meta" id="traj-meta">trace <b>${esc(t.trace_id)}</b> · step ${t.step} · sample ${t.sample_index} · rollout ${t.rollout_n}
    · validate ${t.validate} · reward <b class="${rewardClass(t.reward)}">${fmt(t.reward)}</b>${t.advantage !== null && t.advantage !== undefined ? ` · advantage <b>${fmtAdv(t.advantage)}</b>` : ""}
    · ${esc(t.agent_name)} · ${esc(t.task)} · ${esc(t.data_source)} · ${t.turns} assistant turns · ${t.prompt_tokens}/${t.response_tokens} tokens
    ${t.error ? `<div class="err">${esc(t.error)}</div>` : ""}</div>
  <div class="chat" id="chat">${msgs}</div>`;
}

function diffHTML(ops, side) {
  return ops.map(o => o.op === "=" ? esc(o.text) : (o.op === "-" ? (side === "a" ? `<del>${esc(o.text)}</del>` : "")
    : (side === "b" ? `<ins>${esc(o.text)}</ins>` : ""))).filter(Boolean).join(" ");
}

async function showCompare(q) {
  const sample = q.get("sample"), validate = q.get("validate") === "true";
  const all = await api(`/api/compare?sample=${encodeURIComponent(sample)}&validate=${validate}`);
  const stepNums = all.steps.map(g => g.step);
  const across = validate ? "steps" : "epochs";
  if (stepNums.length < 2) {
    app.innerHTML = `<p><a href="#/">← all trajectories</a></p><p class="err-banner" id="error">sample ${esc(sample)}${validate ? " (validation)" : ""}
      was traced at step ${stepNums[0]} only: there is nothing to compare it with across ${across}.</p>`;
    return;
  }
  const a = q.get("a") ? Number(q.get("a")) : stepNums[0];
  const b = q.get("b") ? Number(q.get("b")) : stepNums[stepNums.length - 1];
  const pair = await api(`/api/compare?sample=${encodeURIComponent(sample)}&validate=${validate}&steps=${a},${b}`);
  const ga = pair.steps.find(g => g.step === a) || {rollouts: []}, gb = pair.steps.find(g => g.step === b) || {rollouts: []};
  const mean = (g, f) => g.rollouts.length ? g.rollouts.reduce((s, r) => s + f(r), 0) / g.rollouts.length : 0;
  const overview = all.steps.map(g => `<tr><td class="num">${g.step}</td><td class="num">${g.rollouts.length}</td>
    <td class="num">${fmt(mean(g, r => r.reward))}</td><td class="num">${fmt(mean(g, r => r.words))}</td>
    <td>${g.rollouts.map(r => `<a href="#/t/${r.trace_id}">${fmt(r.reward)}</a>`).join(" ")}</td></tr>`).join("");
  const opt = sel => stepNums.map(s => `<option ${s === sel ? "selected" : ""}>${s}</option>`).join("");
  const rows = gb.rollouts.map(rb => {
    const ra = ga.rollouts.find(r => r.rollout_n === rb.rollout_n);
    const d = a === b ? null : pair.diffs.find(x => x.rollout === rb.rollout_n);
    const card = (r, step, side) => r ? `<div class="card"><h4>step ${step} · rollout ${r.rollout_n} · reward
      <span class="reward ${rewardClass(r.reward)}">${fmt(r.reward)}</span>${r.advantage !== null && r.advantage !== undefined ? ` · advantage ${fmtAdv(r.advantage)}` : ""} · ${r.words} words · ${r.response_tokens} tokens ·
      <a href="#/t/${r.trace_id}">open</a></h4><div class="content">${d ? diffHTML(d.ops, side) : esc(r.text)}</div></div>` : `<div class="card">(not traced)</div>`;
    return card(ra, a, "a") + card(rb, b, "b");
  }).join("");
  app.innerHTML = `<p><a href="#/">← all trajectories</a></p>
  <h3>Sample ${esc(sample)}${validate ? " (validation) across steps" : " (training) across epochs"}</h3>
  <table id="overview"><thead><tr><th>step</th><th>rollouts</th><th>mean reward</th><th>mean words</th><th>rewards (open)</th></tr></thead><tbody>${overview}</tbody></table>
  <div class="cmp-controls">compare step <select id="step-a">${opt(a)}</select> with step <select id="step-b">${opt(b)}</select>
    <span>mean reward ${fmt(mean(ga, r => r.reward))} → ${fmt(mean(gb, r => r.reward))},
    mean length ${fmt(mean(ga, r => r.words))} → ${fmt(mean(gb, r => r.words))} words</span></div>
  <div class="cmp" id="compare">${rows}</div>`;
  const go = () => { location.hash = `#/compare?sample=${sample}&validate=${validate}&a=${document.getElementById("step-a").value}&b=${document.getElementById("step-b").value}`; };
  document.getElementById("step-a").onchange = go;
  document.getElementById("step-b").onchange = go;
}

async function showGroup(q) {
  const step = q.get("step"), sample = q.get("sample"), validate = q.get("validate") === "true";
  const d = await api(`/api/group?step=${encodeURIComponent(step)}&sample=${encodeURIComponent(sample)}&validate=${validate}`);
  const rs = d.rollouts;
  const mean = f => rs.reduce((s, r) => s + f(r), 0) / rs.length;
  const same = r => rs.find(o => o.rollout_n < r.rollout_n && o.text === r.text);
  const cards = rs.map(r => `<div class="card" data-rollout="${r.rollout_n}"><h4>rollout ${r.rollout_n} · reward
      <span class="reward ${rewardClass(r.reward)}">${fmt(r.reward)}</span> · advantage <span class="adv">${r.advantage === null ? (r.validate ? "none (validation)" : "not recorded") : fmtAdv(r.advantage)}</span>
      · ${r.words} words · ${r.response_tokens} tokens · <a href="#/t/${r.trace_id}">open</a></h4>
      ${same(r) ? `<div class="same">same text as rollout ${same(r).rollout_n}</div>` : ""}<div class="content">${esc(r.text)}</div></div>`).join("");
  const distinct = new Set(rs.map(r => r.text)).size;
  app.innerHTML = `<p><a href="#/">← all trajectories</a>${rs[0].sample_steps > 1 ? ` · <a href="#/compare?sample=${sample}&validate=${validate}">sample ${esc(sample)} across ${validate ? "steps" : "epochs"}</a>` : ""}</p>
  <h3>Sample ${esc(sample)} at step ${esc(step)}${validate ? " (validation)" : ""}: its ${rs.length} rollouts</h3>
  <div class="summary" id="group-summary"><span>mean reward ${fmt(mean(r => r.reward))}</span><span>${distinct} distinct responses of ${rs.length}</span>
    <span>mean length ${fmt(mean(r => r.words))} words</span></div>
  <div class="group" id="group" style="grid-template-columns: repeat(${Math.min(rs.length, 4)}, 1fr)">${cards}</div>`;
}

// Two runs' validation at one step (serve --against): each sample's rollout from run A beside
// run B's, with both rewards and a word diff.
async function showRuns(q) {
  const d = await api("/api/runs" + (q.get("step") ? `?step=${encodeURIComponent(q.get("step"))}` : ""));
  const mean = side => { const xs = d.pairs.map(p => p[side]).filter(Boolean); return xs.length ? xs.reduce((s, r) => s + r.reward, 0) / xs.length : 0; };
  const card = (p, side, label) => {
    const r = p[side];
    if (!r) return `<div class="card">(not traced in run ${label})</div>`;
    return `<div class="card"><h4>run ${label} · sample ${p.sample_index} · rollout ${p.rollout_n} · reward
      <span class="reward ${rewardClass(r.reward)}">${fmt(r.reward)}</span> · ${r.words} words</h4>
      <div class="content">${p.diff && p.a && p.b && p.a.text !== p.b.text ? diffHTML(p.diff, side) : esc(r.text)}</div></div>`;
  };
  const opt = d.steps.map(s => `<option ${s === d.step ? "selected" : ""}>${s}</option>`).join("");
  const same = d.pairs.filter(p => p.a && p.b && p.a.text === p.b.text).length;
  app.innerHTML = `<p><a href="#/">← all trajectories</a></p>
  <h3>Validation at step ${d.step}: two runs</h3>
  <div class="summary" id="runs-summary"><span>A ${esc(d.a)}: mean reward ${fmt(mean("a"))}</span>
    <span>B ${esc(d.b)}: mean reward ${fmt(mean("b"))}</span><span>${same} of ${d.pairs.length} answered identically</span></div>
  <div class="cmp-controls">step <select id="runs-step">${opt}</select></div>
  <div class="cmp" id="runs">${d.pairs.map(p => card(p, "a", "A") + card(p, "b", "B")).join("")}</div>`;
  document.getElementById("runs-step").onchange = ev => { location.hash = "#/runs?step=" + ev.target.value; };
}

window.addEventListener("hashchange", route);
route();
