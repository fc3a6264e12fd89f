// @ts-check
/**
 * Dead letters: without a topic, the topics that have some; with one, the first messages of
 * `{topic}.dlq` (reason, retry count, group) to redrive all or the selected ones.
 */

import { api } from "./api.js";
import { clock, num, preview } from "./format.js";
import { messageCard } from "./message.js";
import { act, h, href, reconcile, setText, shortId, StatusLine } from "./ui.js";

/** @param {string[]} params @param {import("./app.js").App} app */
export function deadLetters(params, app) {
  const topic = params[0];
  return topic ? oneTopic(topic, app) : everyTopic(app);
}

/** @param {import("./app.js").App} app */
function everyTopic(app) {
  const tbody = h("tbody");
  const none = h("p", { class: "empty", hidden: true }, "No dead letters anywhere.");
  app.poll(async () => {
    const queues = await api("GET", "/api/queues");
    const dead = queues.filter((/** @type {any} */ q) =>
      q.dlq_depth > 0 && !q.name.endsWith(".dlq")
    );
    reconcile(tbody, dead, (/** @type {any} */ q) => q.name, (q) =>
      h(
        "tr",
        {},
        h("th", { scope: "row" }, h("a", { href: href("dlq", q.name) }, q.name)),
        h("td", { class: "num" }),
      ), (tr, q) => setText(/** @type {HTMLElement} */ (tr.children[1]), num(q.dlq_depth)));
    none.hidden = dead.length > 0;
  });
  return h(
    "div",
    { class: "view dlq" },
    h("h1", {}, "Dead letters"),
    h(
      "p",
      { class: "muted" },
      "A message goes to its topic's .dlq after its third failed attempt. Pick a topic to look inside and redrive.",
    ),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        {},
        h("caption", { class: "sr-only" }, "Topics with dead letters"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Topic"),
            h("th", { scope: "col", class: "num" }, "Dead letters"),
          ),
        ),
        tbody,
      ),
    ),
    none,
  );
}

/** @param {string} topic @param {import("./app.js").App} app */
function oneTopic(topic, app) {
  const source = `${topic}.dlq`;
  const status = new StatusLine();
  const depth = h("span", {}, "…");
  const tbody = h("tbody");
  const details = h("div", { class: "result" });
  const none = h("p", { class: "empty", hidden: true }, "No dead letters.");
  const selectAll = h("input", {
    type: "checkbox",
    id: "dlq-all",
    "aria-label": "Select every message shown",
  });
  const redriveSel = h(
    "button",
    { type: "button", class: "primary", disabled: true },
    "Redrive selected",
  );
  const redriveAll = h("button", { type: "button" }, "Redrive all");
  const refresh = h("button", { type: "button" }, "Refresh");
  /** @type {Set<string>} */
  const selected = new Set();
  /** @type {import("./message.js").Message[]} */
  let msgs = [];

  function updateButtons() {
    redriveSel.disabled = selected.size === 0;
    setText(redriveSel, selected.size ? `Redrive selected (${selected.size})` : "Redrive selected");
    selectAll.checked = msgs.length > 0 && selected.size === msgs.length;
    selectAll.indeterminate = selected.size > 0 && selected.size < msgs.length;
  }

  function render() {
    reconcile(tbody, msgs, (m) => m.id, (m) => {
      const box = h("input", { type: "checkbox", "aria-label": `Select ${m.id}` });
      box.addEventListener("change", () => {
        if (box.checked) selected.add(m.id);
        else selected.delete(m.id);
        updateButtons();
      });
      const show = h(
        "button",
        { type: "button", class: "small", "aria-label": `Show ${m.id}` },
        "Show",
      );
      show.addEventListener("click", () => {
        details.replaceChildren(messageCard(m));
        details.querySelector("article")?.setAttribute("tabindex", "-1");
        /** @type {HTMLElement | null} */ (details.querySelector("article"))?.focus();
      });
      return h(
        "tr",
        {},
        h("td", {}, box),
        h("td", {}, shortId(m.id)),
        h("td", {}, m.reason ?? ""),
        h("td", { class: "num" }, String(m.retry_count)),
        h(
          "td",
          {},
          (m.group ?? "").split(",").map((g) => g || "(default)").join(", "),
        ),
        h("td", {}, clock(m.timestamp)),
        h("td", { class: "payload-cell" }, preview(m, 48)),
        h("td", {}, show),
      );
    }, (tr, m) => {
      /** @type {HTMLInputElement} */ (tr.querySelector("input")).checked = selected.has(m.id);
    });
    none.hidden = msgs.length > 0;
    updateButtons();
  }

  async function load() {
    msgs = await api("GET", "/api/queues/peek", { query: { queue: source, limit: 10 } }).catch(
      (e) => {
        if (e?.status === 404) return [];
        throw e;
      },
    );
    for (const id of [...selected]) if (!msgs.some((m) => m.id === id)) selected.delete(id);
    render();
  }

  /** @param {HTMLButtonElement} btn @param {string[] | undefined} ids */
  const redrive = (btn, ids) =>
    act(btn, status, "Redriving…", async () => {
      const r = await api("POST", "/api/queues/redrive", {
        query: { queue: source },
        json: ids ? { ids } : undefined,
      });
      selected.clear();
      details.replaceChildren();
      await load();
      const asked = ids ? ` of ${ids.length} selected` : "";
      return `Moved ${num(r.moved)} message(s)${asked} back to ${r.queue}`;
    });

  selectAll.addEventListener("change", () => {
    selected.clear();
    if (selectAll.checked) { for (const m of msgs) selected.add(m.id); }
    render();
  });
  redriveSel.addEventListener("click", () => redrive(redriveSel, [...selected]));
  redriveAll.addEventListener("click", () => redrive(redriveAll, undefined));
  refresh.addEventListener(
    "click",
    () => act(refresh, status, "Loading…", async () => await load()),
  );

  app.poll(async () => {
    const queues = await api("GET", "/api/queues");
    const item = queues.find((/** @type {any} */ q) => q.name === topic);
    const dlq = queues.find((/** @type {any} */ q) => q.name === source);
    setText(depth, num(item?.dlq_depth ?? dlq?.depth ?? 0));
  });
  load().catch(app.fail);

  return h(
    "div",
    { class: "view dlq" },
    h(
      "p",
      { class: "crumbs" },
      h("a", { href: "#/dlq" }, "Dead letters"),
      " › ",
      h("a", { href: href("queue", topic) }, topic),
    ),
    h("h1", {}, "Dead letters of ", h("code", {}, topic)),
    h(
      "p",
      {},
      depth,
      ` message(s) in `,
      h("a", { href: href("queue", source) }, source),
      ". The list shows the first 10, oldest first; redrive moves them back with retry count 0.",
    ),
    h("div", { class: "buttons" }, redriveSel, redriveAll, refresh),
    status.el,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        {},
        h("caption", { class: "sr-only" }, `Dead letters of ${topic}`),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, selectAll),
            ["Id", "Reason"].map((x) => h("th", { scope: "col" }, x)),
            h("th", { scope: "col", class: "num" }, "Retries"),
            ["Group", "Published", "Payload"].map((x) => h("th", { scope: "col" }, x)),
            h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Details")),
          ),
        ),
        tbody,
      ),
    ),
    none,
    details,
  );
}
