// @ts-check
/**
 * A queue: its settings and figures, per-group figures, its rates, peek, publish, consume one,
 * the messages in flight with a Release button each, and purge/delete behind a confirmation
 * that asks for the queue's name.
 */

import { api, urlOf } from "./api.js";
import { RateChart, series } from "./chart.js";
import { age, bytes, clock, dateTime, num, preview, relative } from "./format.js";
import { messageCard } from "./message.js";
import {
  act,
  confirmDialog,
  field,
  h,
  href,
  reconcile,
  setText,
  shortId,
  StatusLine,
} from "./ui.js";

/** @param {string[]} params @param {import("./app.js").App} app */
export function queueView(params, app) {
  const name = params[0] ?? "";
  const q = encodeURIComponent(name);
  const isDlq = name.endsWith(".dlq");
  const origin = isDlq ? name.slice(0, -4) : name;

  // Figures and settings
  /** @type {Record<string, HTMLElement>} */
  const dd = {};
  const FIGS = [
    ["depth", "Ready"],
    ["in_flight", "In flight"],
    ["delayed", "Delayed"],
    ["held", "Held"],
    ["held_bytes", "Held bytes"],
    ["dlq_depth", "Dead letters"],
    ["oldest", "Oldest message"],
  ];
  const SETTINGS = [
    ["policy", "Policy when full"],
    ["retain", "Retention"],
    ["visibility", "Visibility timeout"],
    ["max_messages", "Max messages"],
    ["max_bytes", "Max bytes"],
    ["created_at", "Created"],
  ];
  const dl = (/** @type {string[][]} */ list) =>
    h(
      "dl",
      { class: "facts" },
      list.map(([k, label]) => [h("dt", {}, label), dd[k] = h("dd", {}, "…")]),
    );
  const missing = h("p", { class: "notice bad", role: "status", hidden: true });

  // Rates
  const charts = [
    ["published", new RateChart("Published", "t-pub")],
    ["delivered", new RateChart("Delivered", "t-del")],
    ["acked", new RateChart("Acked", "t-ack")],
  ];

  // Groups
  const groupsBody = h("tbody");
  /** @type {string[]} */
  let groupNames = [""];
  const groupSelects = /** @type {HTMLSelectElement[]} */ ([]);
  const groupSelect = (/** @type {string} */ id) => {
    const s = h("select", { id }, h("option", { value: "" }, "(default)"));
    groupSelects.push(s);
    return s;
  };
  function updateGroupSelects() {
    for (const s of groupSelects) {
      const have = [...s.options].map((o) => o.value);
      if (have.join("\n") === groupNames.join("\n")) continue;
      const keep = s.value;
      s.replaceChildren(
        ...groupNames.map((g) => h("option", { value: g, selected: g === keep }, g || "(default)")),
      );
    }
  }

  const view = h(
    "div",
    { class: "view queue" },
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Overview"), " › queue"),
    h("h1", {}, h("span", { class: "sr-only" }, "Queue "), h("code", {}, name)),
    app.notice ? h("p", { class: "notice", role: "status" }, app.notice) : null,
    h(
      "p",
      { class: "links" },
      isDlq
        ? h("a", { href: href("dlq", origin) }, `Redrive these dead letters to ${origin}`)
        : h("a", { href: href("dlq", name) }, "Dead letters"),
      h("a", { href: href("webhooks", name) }, "Webhooks"),
      h("a", { href: href("live", name) }, "Live tail"),
    ),
    missing,
    h(
      "div",
      { class: "top-grid" },
      h(
        "section",
        { class: "card", "aria-labelledby": "figs-h" },
        h("h2", { id: "figs-h" }, "Now"),
        dl(FIGS),
      ),
      h(
        "section",
        { class: "card", "aria-labelledby": "settings-h" },
        h("h2", { id: "settings-h" }, "Settings"),
        dl(SETTINGS),
      ),
      h(
        "section",
        { class: "card", "aria-labelledby": "qrates-h" },
        h("h2", { id: "qrates-h" }, "Rates, last 5 minutes"),
        h("div", { class: "charts" }, charts.map(([, c]) => /** @type {RateChart} */ (c).el)),
      ),
    ),
    h(
      "section",
      { "aria-labelledby": "groups-h" },
      h("h2", { id: "groups-h" }, "Groups"),
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          {},
          h("caption", { class: "sr-only" }, "Consumer groups of this queue"),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "col" }, "Group"),
              ["Ready", "In flight", "Delayed", "Oldest"].map((x) =>
                h("th", { scope: "col", class: "num" }, x)
              ),
            ),
          ),
          groupsBody,
        ),
      ),
    ),
    inFlightPanel(name, groupSelect("inflight-group"), app),
    h(
      "div",
      { class: "panels" },
      publishPanel(name),
      consumePanel(name, groupSelect("consume-group")),
    ),
    peekPanel(name),
    dangerPanel(name, app),
  );

  /** The settings: "none" until read; a queue created while the view is open gets them then. */
  let settings = "none";
  const loadSettings = () => {
    settings = "loading";
    api("GET", `/api/topics/${q}`).then((t) => {
      settings = "shown";
      setText(dd.policy, t.policy);
      setText(dd.retain, t.retain ?? "none (kept until acked)");
      setText(dd.visibility, t.visibility);
      setText(dd.max_messages, num(t.max_messages));
      setText(dd.max_bytes, t.max_bytes === null ? "no limit" : bytes(t.max_bytes));
      setText(dd.created_at, dateTime(t.created_at));
    }).catch((e) => {
      settings = "none";
      if (e?.status !== 404) app.fail(e);
    });
  };
  loadSettings();

  app.poll(async () => {
    const [queues, stats, rates] = await Promise.all([
      api("GET", "/api/queues"),
      api("GET", "/api/stats"),
      api("GET", "/api/rates", { query: { queue: name } }).catch((e) => {
        if (e?.status === 404) return { points: [] };
        throw e;
      }),
    ]);
    if (!app.alive()) return;
    /** @type {import("./overview.js").QueueItem | undefined} */
    const item = queues.find((/** @type {{ name: string }} */ x) => x.name === name);
    missing.hidden = !!item;
    setText(
      missing,
      item ? "" : `There is no queue named "${name}" (yet): publishing to it creates it.`,
    );
    if (item) {
      setText(dd.depth, num(item.depth));
      setText(dd.in_flight, num(item.in_flight));
      setText(dd.delayed, num(item.delayed));
      setText(dd.held, num(item.held));
      setText(dd.held_bytes, bytes(item.held_bytes));
      setText(dd.dlq_depth, isDlq ? "–" : num(item.dlq_depth));
      setText(dd.oldest, item.held ? age(item.oldest_age_seconds) : "–");
      if (settings === "none") loadSettings();
    }
    for (const [field, chart] of charts) {
      /** @type {RateChart} */ (chart).update(
        series(rates.points ?? [], /** @type {string} */ (field)),
      );
    }
    const t = stats.topics?.[name];
    /** @type {[string, { depth: number, in_flight: number, delayed: number, oldest_age_seconds: number }][]} */
    const groups = t ? Object.entries(t.groups) : [];
    groupNames = ["", ...groups.map(([g]) => g).filter((g) => g !== "")];
    groupNames = [...new Set(groupNames)];
    updateGroupSelects();
    reconcile(groupsBody, groups, ([g]) => g, () =>
      h(
        "tr",
        {},
        h("th", { scope: "row" }),
        h("td", { class: "num" }),
        h("td", { class: "num" }),
        h("td", { class: "num" }),
        h("td", { class: "num" }),
      ), (tr, [g, f]) => {
      const c = /** @type {HTMLElement[]} */ ([...tr.children]);
      setText(c[0], g === "" ? "(default)" : g);
      setText(c[1], num(f.depth));
      setText(c[2], num(f.in_flight));
      setText(c[3], num(f.delayed));
      setText(c[4], f.depth + f.in_flight + f.delayed ? age(f.oldest_age_seconds) : "–");
    });
  });

  return view;
}

/** The publish form: payload, ttl, delay, priority, broadcast, idempotency key, X-MQ-* headers. @param {string} name */
function publishPanel(name) {
  const status = new StatusLine();
  const payload = h("textarea", { id: "pub-payload", rows: 5, required: true, spellcheck: false });
  const ttl = h("input", {
    id: "pub-ttl",
    type: "text",
    placeholder: "e.g. 1h",
    autocomplete: "off",
    pattern: "\\d+(ms|s|m|h)",
  });
  const delay = h("input", {
    id: "pub-delay",
    type: "text",
    placeholder: "e.g. 30s",
    autocomplete: "off",
    pattern: "\\d+(ms|s|m|h)",
  });
  const priority = h(
    "select",
    { id: "pub-priority" },
    ["normal", "high", "low"].map((p) => h("option", { value: p }, p)),
  );
  const broadcast = h("input", { id: "pub-broadcast", type: "checkbox" });
  const idem = h("input", { id: "pub-idem", type: "text", autocomplete: "off" });
  const headers = h("textarea", {
    id: "pub-headers",
    rows: 2,
    spellcheck: false,
    placeholder: "X-MQ-Trace: t-1",
  });
  const submit = h("button", { type: "submit", class: "primary" }, "Publish");
  const form = h(
    "form",
    { class: "card panel", "aria-labelledby": "pub-h" },
    h("h2", { id: "pub-h" }, "Publish"),
    field("Payload", payload, "Sent as typed; JSON goes out as application/json."),
    h(
      "div",
      { class: "row" },
      field("TTL", ttl),
      field("Delay", delay),
      field("Priority", priority),
    ),
    field("Headers", headers, "One X-MQ-Name: value per line."),
    field("Idempotency key", idem, "Optional; a repeat within 5 minutes is not stored again."),
    h(
      "div",
      { class: "field check" },
      broadcast,
      h("label", { for: "pub-broadcast" }, "Broadcast (only to consumers waiting now; not stored)"),
    ),
    h("div", { class: "buttons" }, submit),
    status.el,
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    act(submit, status, "Publishing…", async () => {
      /** @type {Record<string, string>} */
      const hdrs = {};
      for (const line of headers.value.split("\n")) {
        if (!line.trim()) continue;
        const m = /^\s*(x-mq-[A-Za-z0-9-]+)\s*:\s*(.*?)\s*$/i.exec(line);
        if (!m) throw new Error(`Header line "${line.trim()}" is not "X-MQ-Name: value"`);
        hdrs[m[1]] = m[2];
      }
      if (idem.value.trim()) hdrs["idempotency-key"] = idem.value.trim();
      let json = false;
      try {
        JSON.parse(payload.value);
        json = true;
      } catch { /* text */ }
      hdrs["content-type"] = json ? "application/json" : "text/plain; charset=utf-8";
      const r = await api(
        "POST",
        urlOf(`/publish/${encodeURIComponent(name)}`, {
          ttl: ttl.value.trim(),
          delay: delay.value.trim(),
          priority: priority.value === "normal" ? undefined : priority.value,
          broadcast: broadcast.checked ? "true" : undefined,
        }),
        { body: payload.value, headers: hdrs },
      );
      if (r.broadcast) return `Broadcast delivered to ${r.delivered_to} waiting consumer(s)`;
      if (r.deduplicated) return `Deduplicated: the key was seen; the original is ${r.id}`;
      return `Published ${r.id}${r.visible_at ? `, visible ${relative(r.visible_at)}` : ""}`;
    });
  });
  return form;
}

/** Consume one message, acked or left in flight. @param {string} name @param {HTMLSelectElement} group */
function consumePanel(name, group) {
  const status = new StatusLine();
  const out = h("div", { class: "result" });
  const ackBtn = h("button", { type: "button", class: "primary" }, "Consume and ack");
  const keepBtn = h("button", { type: "button" }, "Consume without ack");
  /** @param {HTMLButtonElement} btn @param {boolean} autoAck */
  const take = (btn, autoAck) =>
    act(btn, status, "Consuming…", async () => {
      out.replaceChildren();
      const msg = await api("POST", "/api/queues/consume", {
        json: { queue: name, group: group.value, auto_ack: autoAck },
      });
      const actions = [];
      if (!autoAck) {
        const ackStatus = new StatusLine();
        const ack = h("button", { type: "button" }, "Ack it");
        ack.addEventListener("click", () =>
          act(ack, ackStatus, "Acking…", async () => {
            await api(
              "POST",
              urlOf(`/ack/${encodeURIComponent(name)}/${encodeURIComponent(msg.id)}`, {
                group: group.value,
              }),
            );
            ack.remove();
            return "Acked";
          }));
        actions.push(ack, ackStatus.el);
      }
      out.replaceChildren(messageCard(msg, actions));
      return autoAck
        ? `Consumed and acked ${msg.id}`
        : `Consumed ${msg.id}; it stays in flight until acked or released`;
    });
  ackBtn.addEventListener("click", () => take(ackBtn, true));
  keepBtn.addEventListener("click", () => take(keepBtn, false));
  return h(
    "section",
    { class: "card panel", "aria-labelledby": "con-h" },
    h("h2", { id: "con-h" }, "Consume one"),
    field("Group", group, undefined, true),
    h("div", { class: "buttons" }, ackBtn, keepBtn),
    status.el,
    out,
  );
}

/** Peek up to 10 messages without taking them. @param {string} name */
function peekPanel(name) {
  const status = new StatusLine();
  const limit = h("input", { id: "peek-limit", type: "number", min: 1, max: 10, value: "10" });
  const btn = h("button", { type: "submit", class: "primary" }, "Peek");
  const out = h("div", { class: "result" });
  const form = h(
    "form",
    { class: "card panel peek", "aria-labelledby": "peek-h" },
    h("h2", { id: "peek-h" }, "Peek"),
    h(
      "p",
      { class: "muted small" },
      "The next messages of the default group, in delivery order; nothing is taken.",
    ),
    h(
      "div",
      { class: "toolbar" },
      field("How many (1–10)", limit, undefined, true),
      h("div", { class: "buttons end" }, btn),
    ),
    status.el,
    out,
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    act(btn, status, "Peeking…", async () => {
      const msgs = await api("GET", "/api/queues/peek", {
        query: { queue: name, limit: limit.value },
      });
      out.replaceChildren(
        ...msgs.map((/** @type {import("./message.js").Message} */ m) => messageCard(m)),
      );
      return msgs.length
        ? `${msgs.length} message(s), first in line first`
        : "Nothing ready to peek";
    });
  });
  return form;
}

/** The messages in flight and a Release button each. @param {string} name @param {HTMLSelectElement} group @param {import("./app.js").App} app */
function inFlightPanel(name, group, app) {
  const status = new StatusLine();
  const tbody = h("tbody");
  const none = h("p", { class: "empty", hidden: true }, "Nothing in flight.");
  /** @type {any[]} */
  let items = [];
  const render = () => {
    reconcile(tbody, items, (m) => m.id, (m) => {
      const release = h("button", { type: "button", class: "small" }, "Release");
      release.setAttribute("aria-label", `Release ${m.id}`);
      release.addEventListener("click", () =>
        act(release, status, "Releasing…", async () => {
          const r = await api("POST", "/api/queues/release", {
            json: { queue: name, group: group.value, id: m.id },
          });
          items = items.filter((x) => x.id !== m.id);
          render();
          return `Released ${r.id}: ready again now, retry count ${r.retry_count}`;
        }));
      return h(
        "tr",
        {},
        h("td", {}, shortId(m.id)),
        h("td", {}),
        h("td", { class: "num" }),
        h("td", {}),
        h("td", {}, release),
      );
    }, (tr, m) => {
      const c = /** @type {HTMLElement[]} */ ([...tr.children]);
      setText(c[1], `${clock(m.lease_ends_at)} (${relative(m.lease_ends_at)})`);
      setText(c[2], String(m.retry_count));
      setText(c[3], preview(m, 60));
    });
    none.hidden = items.length > 0;
  };
  group.addEventListener("change", () => {
    items = [];
    render();
  });
  app.poll(async () => {
    const g = group.value;
    const list = await api("GET", "/api/queues/inflight", { query: { queue: name, group: g } })
      .catch((e) => {
        if (e?.status === 404) return [];
        throw e;
      });
    if (g !== group.value) return;
    items = list;
    render();
  });
  return h(
    "section",
    { class: "card", "aria-labelledby": "inflight-h" },
    h("h2", { id: "inflight-h" }, "In flight"),
    field("Group", group, undefined, true),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        {},
        h("caption", { class: "sr-only" }, "Messages in flight, soonest lease end first"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Id"),
            h("th", { scope: "col" }, "Lease ends"),
            h("th", { scope: "col", class: "num" }, "Retries"),
            h("th", { scope: "col" }, "Payload"),
            h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
          ),
        ),
        tbody,
      ),
    ),
    none,
    status.el,
  );
}

/** Purge and delete, each behind a dialog that asks for the queue's name. @param {string} name @param {import("./app.js").App} app */
function dangerPanel(name, app) {
  const status = new StatusLine();
  const purge = h("button", { type: "button", class: "danger" }, "Purge…");
  const del = h("button", { type: "button", class: "danger" }, "Delete queue…");
  purge.addEventListener("click", async () => {
    const ok = await confirmDialog({
      title: `Purge ${name}?`,
      message: "Every message of this queue is removed, in every group. This cannot be undone.",
      action: "Purge",
      typeName: name,
    });
    if (!ok) return status.ok("Purge cancelled");
    await act(purge, status, "Purging…", async () => {
      const r = await api("DELETE", "/api/queues/purge", { query: { queue: name } });
      return `Purged ${num(r.purged)} message(s)`;
    });
  });
  del.addEventListener("click", async () => {
    const ok = await confirmDialog({
      title: `Delete ${name}?`,
      message:
        "The queue, its messages, groups and webhooks and its WAL file are removed. This cannot be undone.",
      action: "Delete",
      typeName: name,
    });
    if (!ok) return status.ok("Delete cancelled");
    await act(del, status, "Deleting…", async () => {
      await api("DELETE", "/api/queues/delete", { query: { queue: name } });
      app.go("#/", `Deleted queue ${name}`);
    });
  });
  return h(
    "section",
    { class: "card danger-zone", "aria-labelledby": "danger-h" },
    h("h2", { id: "danger-h" }, "Danger zone"),
    h("div", { class: "buttons" }, purge, del),
    status.el,
  );
}
