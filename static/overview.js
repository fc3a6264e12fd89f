// @ts-check
/**
 * Overview: the broker (health, version, uptime, role), its totals with live rate charts, and
 * every queue in a sortable, filterable, paginated table, refreshed every 2 seconds.
 */

import { api } from "./api.js";
import { RateChart, series } from "./chart.js";
import { age, bytes, num, rate } from "./format.js";
import { h, href, reconcile, setText } from "./ui.js";

/**
 * @typedef {object} QueueItem
 * @property {string} name
 * @property {number} depth
 * @property {number} in_flight
 * @property {number} delayed
 * @property {number} held
 * @property {number} held_bytes
 * @property {number} dlq_depth
 * @property {string[]} groups
 * @property {string} policy
 * @property {string | null} retain
 * @property {number} oldest_age_seconds
 */

/** @typedef {QueueItem & { pub?: number, ack?: number }} Row */

/** A queue whose oldest message is older than this is flagged as stuck. */
const STUCK_SECONDS = 300;
const PAGE_SIZES = [25, 50, 100, 250];

/** @type {{ key: keyof Row, label: string, numeric: boolean }[]} */
const COLUMNS = [
  { key: "name", label: "Queue", numeric: false },
  { key: "depth", label: "Ready", numeric: true },
  { key: "in_flight", label: "In flight", numeric: true },
  { key: "delayed", label: "Delayed", numeric: true },
  { key: "dlq_depth", label: "DLQ", numeric: true },
  { key: "groups", label: "Groups", numeric: true },
  { key: "oldest_age_seconds", label: "Oldest", numeric: true },
  { key: "pub", label: "Publish/s", numeric: true },
  { key: "ack", label: "Ack/s", numeric: true },
];

/** What the table shows; kept while the page is open, so coming back finds it as it was. */
const state = {
  /** @type {keyof Row} */
  sort: "name",
  desc: false,
  filter: "",
  hideDlq: false,
  page: 0,
  pageSize: 50,
};

/** @param {string[]} _params @param {import("./app.js").App} app */
export function overview(_params, app) {
  // The broker
  const facts = {
    status: h("dd", {}, "…"),
    version: h("dd", {}, "…"),
    uptime: h("dd", {}, "…"),
    role: h("dd", {}, "…"),
    mode: h("dd", {}, "…"),
    node: h("dd", { class: "node" }, "…"),
    memory: h("dd", {}, "…"),
  };
  const brokerCard = h(
    "section",
    { class: "card broker", "aria-labelledby": "broker-h" },
    h("h2", { id: "broker-h" }, "Broker"),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Health"),
      facts.status,
      h("dt", {}, "Version"),
      facts.version,
      h("dt", {}, "Uptime"),
      facts.uptime,
      h("dt", {}, "Cluster"),
      facts.mode,
      h("dt", {}, "Role"),
      facts.role,
      h("dt", {}, "Node"),
      facts.node,
      h("dt", {}, "Memory held"),
      facts.memory,
    ),
  );

  // Totals and charts
  const TOTALS = [
    ["published", "Published", "t-pub"],
    ["delivered", "Delivered", "t-del"],
    ["acked", "Acked", "t-ack"],
    ["requeued", "Requeued", "t-req"],
    ["dead_lettered", "Dead-lettered", "t-dead"],
    ["expired", "Expired", "t-exp"],
  ];
  /** @type {Record<string, { chart: RateChart, total: HTMLElement }>} */
  const charts = {};
  const chartGrid = h("div", { class: "charts" });
  for (const [field, label, tone] of TOTALS) {
    const chart = new RateChart(label, tone);
    const total = h("span", { class: "total" }, "–");
    chart.el.querySelector("figcaption")?.append(
      h("span", { class: "sr-only" }, "; total "),
      total,
    );
    charts[field] = { chart, total };
    chartGrid.append(chart.el);
  }

  // Queues
  const filter = h("input", {
    id: "queue-filter",
    type: "search",
    value: state.filter,
    placeholder: "part of a name",
    autocomplete: "off",
  });
  const hideDlq = h("input", { id: "hide-dlq", type: "checkbox", checked: state.hideDlq });
  const pageSize = h(
    "select",
    { id: "page-size" },
    PAGE_SIZES.map((n) =>
      h("option", { value: String(n), selected: n === state.pageSize }, String(n))
    ),
  );
  const count = h("span", { class: "muted" });
  const heads = COLUMNS.map((c) => {
    const btn = h(
      "button",
      { type: "button", class: "sort", onclick: () => sortBy(c.key) },
      c.label,
    );
    return { c, btn, th: h("th", { scope: "col", class: c.numeric ? "num" : "" }, btn) };
  });
  const tbody = h("tbody");
  const empty = h("p", { class: "empty", hidden: true });
  const prev = h("button", { type: "button", onclick: () => turn(-1) }, "‹ Previous");
  const next = h("button", { type: "button", onclick: () => turn(1) }, "Next ›");
  const pageInfo = h("span", { "aria-live": "polite" });

  filter.addEventListener("input", () => {
    state.filter = filter.value;
    state.page = 0;
    render();
  });
  hideDlq.addEventListener("change", () => {
    state.hideDlq = hideDlq.checked;
    state.page = 0;
    render();
  });
  pageSize.addEventListener("change", () => {
    state.pageSize = Number(pageSize.value);
    state.page = 0;
    render();
  });

  /** @type {Row[]} */
  let rows = [];
  /** False until the first answer: an empty table then means "not known yet", not "none". */
  let loaded = false;

  /** @param {keyof Row} key */
  function sortBy(key) {
    if (state.sort === key) state.desc = !state.desc;
    else {
      state.sort = key;
      state.desc = key !== "name"; // figures: biggest first
    }
    render();
  }
  /** @param {number} by */
  function turn(by) {
    state.page += by;
    render();
  }

  function render() {
    const needle = state.filter.trim().toLowerCase();
    const shown = rows.filter((r) =>
      (!needle || r.name.toLowerCase().includes(needle)) &&
      !(state.hideDlq && r.name.endsWith(".dlq"))
    );
    const key = state.sort;
    const dir = state.desc ? -1 : 1;
    shown.sort((a, b) => {
      const va = key === "groups" ? a.groups.length : a[key] ?? -1;
      const vb = key === "groups" ? b.groups.length : b[key] ?? -1;
      if (va < vb) return -dir;
      if (va > vb) return dir;
      return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
    const pages = Math.max(1, Math.ceil(shown.length / state.pageSize));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    const first = state.page * state.pageSize;
    const page = shown.slice(first, first + state.pageSize);
    reconcile(tbody, page, (r) => r.name, createRow, updateRow);
    for (const { c, th } of heads) {
      if (c.key === state.sort) {
        th.setAttribute("aria-sort", state.desc ? "descending" : "ascending");
      } else th.removeAttribute("aria-sort");
    }
    setText(count, loaded ? `${num(shown.length)} of ${num(rows.length)}` : "");
    setText(
      pageInfo,
      shown.length
        ? `${num(first + 1)}–${num(first + page.length)} of ${num(shown.length)}, page ${
          state.page + 1
        } of ${pages}`
        : "",
    );
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
    empty.hidden = page.length > 0;
    setText(
      empty,
      !loaded
        ? "Loading the queues…"
        : rows.length
        ? "No queue matches the filter."
        : "No queues yet. Publish a message to create one.",
    );
  }

  const view = h(
    "div",
    { class: "view overview" },
    h("h1", {}, "Overview"),
    app.notice ? h("p", { class: "notice", role: "status" }, app.notice) : null,
    h(
      "div",
      { class: "top-grid" },
      brokerCard,
      h(
        "section",
        { class: "card", "aria-labelledby": "rates-h" },
        h("h2", { id: "rates-h" }, "Rates, last 5 minutes"),
        chartGrid,
      ),
    ),
    h(
      "section",
      { "aria-labelledby": "queues-h" },
      h("div", { class: "section-head" }, h("h2", { id: "queues-h" }, "Queues ", count)),
      h(
        "div",
        { class: "toolbar" },
        h("div", { class: "field inline" }, h("label", { for: "queue-filter" }, "Filter"), filter),
        h(
          "div",
          { class: "field inline check" },
          hideDlq,
          h("label", { for: "hide-dlq" }, "Hide .dlq queues"),
        ),
        h("div", { class: "field inline" }, h("label", { for: "page-size" }, "Per page"), pageSize),
      ),
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "queues" },
          h("caption", { class: "sr-only" }, "Queues; the column buttons sort"),
          h("thead", {}, h("tr", {}, heads.map((x) => x.th))),
          tbody,
        ),
      ),
      empty,
      h("nav", { class: "pager", "aria-label": "Queue pages" }, prev, pageInfo, next),
    ),
  );

  app.poll(async () => {
    const [queues, rates, stats] = await Promise.all([
      api("GET", "/api/queues"),
      api("GET", "/api/rates"),
      api("GET", "/api/stats"),
    ]);
    if (!app.alive()) return;
    /** @type {Record<string, Record<string, number>>} */
    const latest = rates.topics ?? {};
    loaded = true;
    rows = /** @type {QueueItem[]} */ (queues).map((q) => ({
      ...q,
      pub: latest[q.name]?.published,
      ack: latest[q.name]?.acked,
    }));
    render();
    for (const [field] of TOTALS) {
      charts[field].chart.update(series(rates.totals, field));
      setText(charts[field].total, `${num(stats.totals[field])} total`);
    }
    setText(facts.uptime, age(stats.uptime_seconds));
    setText(
      facts.memory,
      `${bytes(stats.memory.held_bytes)} of ${bytes(stats.memory.budget_bytes)}`,
    );
  });
  app.poll(async () => {
    const [health, cluster] = await Promise.all([
      fetch("/healthz").then((r) => r.json()),
      api("GET", "/api/cluster/status"),
    ]);
    if (!app.alive()) return;
    setText(facts.status, health.status);
    facts.status.className = health.status === "ok" ? "good" : "bad";
    setText(facts.version, health.version ?? "–");
    // A standalone node leads only itself: a role and term would suggest a cluster.
    setText(
      facts.role,
      cluster.mode === "cluster" ? `${cluster.role}, term ${cluster.term}` : "standalone",
    );
    setText(facts.mode, cluster.mode);
    setText(facts.node, cluster.node_id);
  }, 5000);

  render();
  return view;
}

/** @param {Row} r */
function createRow(r) {
  const tr = h("tr");
  tr.append(
    h("th", { scope: "row" }, h("a", { href: href("queue", r.name) }, r.name)),
    ...COLUMNS.slice(1).map(() => h("td", { class: "num" })),
  );
  return tr;
}

/** @param {HTMLElement} tr @param {Row} r */
function updateRow(tr, r) {
  const cells = /** @type {HTMLElement[]} */ ([...tr.children]);
  setText(cells[1], num(r.depth));
  setText(cells[2], num(r.in_flight));
  setText(cells[3], num(r.delayed));
  const dlq = cells[4];
  if (r.dlq_depth > 0) {
    let a = dlq.querySelector("a");
    if (!a) {
      a = h("a", { href: href("dlq", r.name), class: "badge warn" });
      dlq.replaceChildren(a);
    }
    setText(a, num(r.dlq_depth));
    a.setAttribute("aria-label", `${num(r.dlq_depth)} dead letters of ${r.name}`);
  } else {
    if (dlq.firstChild?.nodeType !== Node.TEXT_NODE || dlq.textContent !== "0") {
      dlq.replaceChildren("0");
    }
  }
  setText(cells[5], String(r.groups.length));
  cells[5].title = r.groups.length ? r.groups.join(", ") : "the default group only";
  setText(cells[6], r.held > 0 ? age(r.oldest_age_seconds) : "–");
  cells[6].classList.toggle("stuck", r.oldest_age_seconds > STUCK_SECONDS);
  setText(cells[7], rate(r.pub));
  setText(cells[8], rate(r.ack));
}
