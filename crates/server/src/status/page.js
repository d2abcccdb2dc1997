"use strict";
// Redraws the page's figures from /pkgproxy/v1/status, without reloading it.
const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
function bytes(count) {
  let value = count, unit = 0;
  while (value >= 1024 && unit + 1 < UNITS.length) { value /= 1024; unit += 1; }
  return unit === 0 ? count + " B" : value.toFixed(1) + " " + UNITS[unit];
}
function ratio(share) { return share === null ? "\u2013" : (share * 100).toFixed(1) + " %"; }
function duration(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  if (d > 0) return d + "d " + h + "h";
  if (h > 0) return h + "h " + m + "m";
  if (m > 0) return m + "m " + (s % 60) + "s";
  return s + "s";
}
function text(id, value) { const node = document.getElementById(id); if (node) node.textContent = value; }
function cell(row, value, className, label) {
  const td = row.insertCell();
  td.textContent = value;
  if (className) td.className = className;
  if (label) td.dataset.label = label;
}
function modeShown(mode) {
  return { never: "online", offline: "offline", "store-overloaded": "leaving overloaded upstreams alone" }[mode] || mode;
}
function httpDate(at) { return new Date(at * 1000).toUTCString(); }
function timeOfDay(at) { return new Date(at * 1000).toLocaleTimeString([], { hour12: false }); }
function banner(offline) {
  const why = offline.reason ? "auto-offline: " + offline.reason : "set by an admin";
  const since = offline.since ? " since " + httpDate(offline.since) : "";
  if (offline.mode === "offline") {
    return "Offline (" + why + ")" + since + ": only what the cache holds is served, nothing is asked upstream. Back online: sudo pkgproxyctl offline online";
  }
  if (offline.mode === "store-overloaded") {
    return "Leaving overloaded upstreams alone (" + why + ")" + since + ": an upstream that fails is rested, what is cached is served. Back to normal: sudo pkgproxyctl offline online";
  }
  return "";
}
function rows(id, items, fill) {
  const body = document.getElementById(id);
  if (!body) return;
  body.replaceChildren();
  items.forEach(item => fill(body.insertRow(), item));
}
function draw(status) {
  text("uptime", duration(status.uptime_seconds));
  const mode = document.getElementById("mode");
  mode.textContent = modeShown(status.offline.mode);
  mode.className = "mode mode-" + status.offline.mode;
  text("mode-reason", status.offline.reason ? " (auto-offline: " + status.offline.reason + ")" : "");
  const banned = document.getElementById("banner");
  banned.textContent = banner(status.offline);
  banned.hidden = banned.textContent === "";
  charts(status.sides);
  status.sides.forEach(side => {
    const row = document.querySelector('#sides tr[data-side="' + side.name + '"]');
    if (!row) return;
    row.classList.toggle("idle", side.requests === 0);
    row.querySelector(".requests").textContent = side.requests;
    row.querySelector(".hits").textContent = side.hits;
    row.querySelector(".misses").textContent = side.misses;
    row.querySelector(".ratio").textContent = ratio(side.hit_ratio);
    row.querySelector(".refused").textContent = side.refused;
    const failed = row.querySelector(".failed");
    failed.textContent = side.failed;
    failed.className = side.failed > 0 ? "failed bad" : "failed";
    row.querySelector(".saved").textContent = bytes(side.bytes_saved);
    row.querySelector(".fetched").textContent = bytes(side.bytes_fetched);
  });
  rows("trouble", status.recent_trouble, (row, trouble) => {
    cell(row, timeOfDay(trouble.at), "", "when"); row.cells[0].title = httpDate(trouble.at); cell(row, trouble.side || "\u2013", "", "side");
    cell(row, trouble.status, "bad", "status"); cell(row, trouble.path || "\u2013", "", "asked");
    cell(row, trouble.reason, "", "why");
  });
  if (status.recent_trouble.length === 0) {
    rows("trouble", [null], row => { const td = row.insertCell(); td.colSpan = 5; td.textContent = "nothing refused or failed since start"; });
  }
  if (status.policy) {
    const rules = document.getElementById("policy-rules");
    if (rules) {
      const shown = status.policy.rules.length > 0 ? status.policy.rules : ["no rule: every release is served"];
      rules.replaceChildren(...shown.map(rule => { const item = document.createElement("li"); item.textContent = rule; return item; }));
    }
    rows("policy-blocked", status.policy.recent, (row, refused) => {
      cell(row, timeOfDay(refused.at), "", "when"); row.cells[0].title = httpDate(refused.at);
      cell(row, refused.release, "", "release"); cell(row, refused.because, "", "why");
    });
    if (status.policy.recent.length === 0) {
      rows("policy-blocked", [null], row => { const td = row.insertCell(); td.colSpan = 3; td.textContent = "nothing blocked since start"; });
    }
  }
  const cache = status.cache;
  text("cache-size", bytes(cache.size_bytes));
  text("cache-limit", cache.max_size_bytes === null ? "no size limit" : "of " + bytes(cache.max_size_bytes));
  text("cache-entries", cache.entries);
  text("disk-free", bytes(cache.free_bytes));
  const meter = document.getElementById("cache-meter");
  const limited = cache.max_size_bytes !== null;
  meter.max = limited ? cache.max_size_bytes : cache.filesystem_bytes;
  meter.value = limited ? cache.size_bytes : cache.filesystem_bytes - cache.free_bytes;
  const share = meter.max > 0 ? meter.value / meter.max : 0;
  text("meter-caption", (share * 100).toFixed(0) + " % " + (limited ? "of its size limit used by the cache"
    : "of the cache's file system in use (by the cache and all else on it)"));
  if (status.cluster) {
    const state = document.getElementById("cluster-state");
    if (state) { state.textContent = status.cluster.state; state.className = "state-" + status.cluster.state; }
    text("cluster-shared", status.cluster.shared_hits);
    text("cluster-published", status.cluster.published);
  }
  const instances = status.pools.flatMap(pool => pool.instances.map(instance => [pool.name, instance]));
  rows("pools", instances, (row, [pool, instance]) => {
    cell(row, pool); cell(row, instance.url); cell(row, instance.state, "state-" + instance.state);
    cell(row, instance.failures); cell(row, instance.in_flight);
  });
  if (instances.length === 0) rows("pools", [null], row => { const td = row.insertCell(); td.colSpan = 5; td.textContent = "none asked yet"; });
  const breakers = document.getElementById("breakers");
  breakers.replaceChildren(...status.offline.upstreams.map(upstream => {
    const item = document.createElement("li");
    const retry = upstream.retry_after_seconds ? ", tried again in " + duration(upstream.retry_after_seconds) : "";
    item.textContent = upstream.host + ": breaker " + upstream.state + retry;
    return item;
  }));
  rows("mirrors", status.mirrors, (row, mirror) => {
    cell(row, mirror.name); cell(row, mirror.target); cell(row, mirror.sent); cell(row, mirror.answered);
    cell(row, mirror.failed); cell(row, mirror.skipped_inflight + mirror.skipped_size + mirror.skipped_offline);
  });
  text("refreshed", "updated " + new Date().toLocaleTimeString());
}
async function refresh() {
  try {
    const answer = await fetch("/pkgproxy/v1/status", { cache: "no-store" });
    if (answer.ok) draw(await answer.json());
    else text("refreshed", "status unavailable (" + answer.status + ")");
  } catch (error) {
    text("refreshed", "pkgproxy unreachable");
  }
}
refresh();
setInterval(refresh, REFRESH_MS);
