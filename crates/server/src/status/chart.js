"use strict";
// Draws the traffic charts from the JSON as chart.rs draws them at first load.
const SVG = "http://www.w3.org/2000/svg";
function element(name, attributes, children) {
  const node = name === "svg" || ["g", "rect", "line", "title"].includes(name)
    ? document.createElementNS(SVG, name) : document.createElement(name);
  Object.entries(attributes || {}).forEach(([key, value]) => node.setAttribute(key, value));
  (children || []).forEach(child => node.append(child));
  return node;
}
const TRAFFIC = ["requests", "hits", "misses", "refused", "failed", "bytes_from_cache", "bytes_from_upstream"];
function total(stretches) {
  const sum = {};
  TRAFFIC.forEach(field => { sum[field] = stretches.reduce((all, stretch) => all + (stretch[field] || 0), 0); });
  return sum;
}
function dayRequests(side) { return total(side.last_day.stretches).requests; }
function busyFirst(sides) {
  const busy = sides.filter(side => side.requests > 0 || dayRequests(side) > 0);
  busy.sort((a, b) => dayRequests(b) - dayRequests(a));
  return [busy, sides.filter(side => !busy.includes(side)).map(side => side.name)];
}
function idleLine(idle, noneBusy) {
  if (idle.length === 0) return "";
  return noneBusy ? "No traffic in the last day yet (" + idle.join(", ") + ")." : "No traffic in the last day: " + idle.join(", ") + ".";
}
function ago(series, fromEnd) {
  const seconds = series.step_seconds * fromEnd;
  return seconds >= 3600 && series.step_seconds >= 900 ? Math.floor(seconds / 3600) + " h ago" : Math.floor(seconds / 60) + " min ago";
}
function figures(sum, span) {
  const decided = sum.hits + sum.misses;
  const parts = [
    element("b", { class: "requests" }, [String(sum.requests)]), " requests \u00b7 ",
    element("b", { class: "ratio" }, [ratio(decided > 0 ? sum.hits / decided : null)]), " hits \u00b7 ",
    element("b", { class: "from-cache" }, [bytes(sum.bytes_from_cache)]), " from cache / ",
    element("b", { class: "fetched" }, [bytes(sum.bytes_from_upstream)]), " fetched",
  ];
  if (sum.refused > 0) parts.push(" \u00b7 ", element("b", { class: "refused bad" }, [String(sum.refused)]), " refused");
  if (sum.failed > 0) parts.push(" \u00b7 ", element("b", { class: "failed bad" }, [String(sum.failed)]), " failed");
  parts.push(" in the last " + span);
  return element("figcaption", {}, parts);
}
function bar(at, top, height, className) {
  return element("rect", { x: at + 0.1, y: top.toFixed(2), width: 0.8, height: height.toFixed(2), class: className });
}
function requestsChart(series, most) {
  const svg = element("svg", { class: "bars", viewBox: "0 0 " + Math.max(series.stretches.length, 1) + " 40", preserveAspectRatio: "none", role: "img" });
  const count = series.stretches.length;
  series.stretches.forEach((stretch, at) => {
    if (stretch.requests === 0) return;
    const other = Math.max(0, stretch.requests - stretch.hits - stretch.misses);
    const group = element("g", {}, [element("title", {}, [ago(series, count - at) + ": " + stretch.requests + " requests, " +
      stretch.hits + " hits, " + stretch.misses + " misses, " + stretch.refused + " refused, " + stretch.failed + " failed"])]);
    let top = 40;
    [[stretch.hits, "hit"], [stretch.misses, "miss"], [other, "bad"]].forEach(([value, className]) => {
      if (value === 0) return;
      const height = value * 40 / Math.max(most, 1);
      top -= height;
      group.append(bar(at, top, height, className));
    });
    svg.append(group);
  });
  svg.append(element("line", { x1: 0, y1: 40, x2: "100%", y2: 40, class: "base" }));
  return svg;
}
function bytesChart(series, most) {
  const svg = element("svg", { class: "bytes", viewBox: "0 0 " + Math.max(series.stretches.length, 1) + " 40", preserveAspectRatio: "none", role: "img" });
  const count = series.stretches.length;
  series.stretches.forEach((stretch, at) => {
    if (stretch.bytes_from_cache + stretch.bytes_from_upstream === 0) return;
    const up = stretch.bytes_from_cache * 20 / Math.max(most, 1), down = stretch.bytes_from_upstream * 20 / Math.max(most, 1);
    svg.append(element("g", {}, [
      element("title", {}, [ago(series, count - at) + ": " + bytes(stretch.bytes_from_cache) + " from cache, " + bytes(stretch.bytes_from_upstream) + " fetched"]),
      bar(at, 20 - up, up, "cache"), bar(at, 20, down, "fetched"),
    ]));
  });
  svg.append(element("line", { x1: 0, y1: 20, x2: "100%", y2: 20, class: "base" }));
  return svg;
}
function span(className, series) {
  const unit = series.step_seconds === 60 ? "a minute" : "a quarter hour";
  const most = Math.max(0, ...series.stretches.map(stretch => stretch.requests));
  const mostBytes = Math.max(0, ...series.stretches.map(stretch => Math.max(stretch.bytes_from_cache, stretch.bytes_from_upstream)));
  const key = name => element("i", { class: "key-" + name });
  return element("figure", { class: "span " + className }, [
    figures(total(series.stretches), className),
    element("div", { class: "plot" }, [element("span", { class: "scale" }, [most + " requests " + unit]), requestsChart(series, most)]),
    element("div", { class: "plot" }, [element("span", { class: "scale" }, [bytes(mostBytes) + " " + unit]), bytesChart(series, mostBytes)]),
    element("div", { class: "axis" }, [element("span", {}, [ago(series, series.stretches.length)]),
      element("span", {}, [ago(series, Math.floor(series.stretches.length / 2))]), element("span", {}, ["now"])]),
    element("p", { class: "legend" }, [key("hit"), "hits ", key("miss"), "misses ", key("bad"), "refused or failed \u00b7 ",
      key("cache"), "from cache ", key("fetched"), "fetched"]),
  ]);
}
function charts(sides) {
  const [busy, idle] = busyFirst(sides);
  document.getElementById("charts").replaceChildren(...busy.map(side => element("article", { class: "side-chart", "data-side": side.name }, [
    element("h3", {}, [side.name]), span("hour", side.last_hour), span("day", side.last_day),
  ])));
  text("idle", idleLine(idle, busy.length === 0));
}
