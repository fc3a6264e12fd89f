// @ts-check
/**
 * Webhooks: every webhook (or one topic's) with its state and last attempt, the attempt log of
 * one, and forms to add and delete them.
 */

import { api } from "./api.js";
import { clock, dateTime } from "./format.js";
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

/**
 * @typedef {object} Attempt
 * @property {string} at
 * @property {number | null} status
 * @property {number} latency_ms
 * @property {string} outcome
 * @property {string | null} error
 * @property {string | null} [answer]
 * @property {string} [message_id]
 * @property {number} [retry_count]
 */

/** A last attempt in a few words. @param {Attempt | null} a */
function attemptText(a) {
  if (!a) return "none yet";
  const what = a.status == null ? (a.error ?? "failed") : `HTTP ${a.status}`;
  return `${clock(a.at)}: ${a.outcome}, ${what}, ${Math.round(a.latency_ms)} ms`;
}

/** @param {string[]} params @param {import("./app.js").App} app */
export function webhooksView(params, app) {
  const topic = params[0] ?? "";
  const listStatus = new StatusLine();
  const tbody = h("tbody");
  const none = h(
    "p",
    { class: "empty", hidden: true },
    topic ? `No webhooks on ${topic}.` : "No webhooks.",
  );
  const log = h("section", { class: "card", "aria-labelledby": "log-h", hidden: true });
  /** @type {string | undefined} */
  let logFor;

  const filterInput = h("input", {
    id: "wh-filter",
    type: "text",
    value: topic,
    autocomplete: "off",
    placeholder: "every topic",
  });
  const filterForm = h(
    "form",
    { class: "toolbar" },
    field("Topic", filterInput),
    h("div", { class: "buttons end" }, h("button", { type: "submit" }, "Show")),
  );
  filterForm.addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = filterInput.value.trim()
      ? href("webhooks", filterInput.value.trim())
      : "#/webhooks";
  });

  async function showLog(/** @type {string} */ id, /** @type {string} */ url) {
    logFor = id;
    const rows = /** @type {Attempt[]} */ (await api(
      "GET",
      `/api/webhooks/${encodeURIComponent(id)}/attempts`,
    ));
    if (logFor !== id) return;
    const body = h("tbody");
    for (const a of rows) {
      body.append(
        h(
          "tr",
          {},
          h("td", {}, dateTime(a.at)),
          h("td", {}, a.message_id ? shortId(a.message_id) : ""),
          h("td", { class: "num" }, String(a.retry_count ?? "")),
          h("td", {}, a.outcome),
          h("td", { class: "num" }, a.status == null ? "–" : String(a.status)),
          h("td", { class: "num" }, `${Math.round(a.latency_ms)} ms`),
          h(
            "td",
            {},
            a.error ??
              (a.answer
                ? h("details", {}, h("summary", {}, "answer"), h("pre", {}, a.answer))
                : ""),
          ),
        ),
      );
    }
    log.hidden = false;
    log.replaceChildren(
      h("h2", { id: "log-h" }, "Attempts of ", h("code", {}, url)),
      rows.length
        ? h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            {},
            h("caption", { class: "sr-only" }, "Recent attempts, newest first"),
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ["When", "Message"].map((x) => h("th", { scope: "col" }, x)),
                h("th", { scope: "col", class: "num" }, "Retry"),
                h("th", { scope: "col" }, "Outcome"),
                ["Status", "Latency"].map((x) => h("th", { scope: "col", class: "num" }, x)),
                h("th", { scope: "col" }, "Error or answer"),
              ),
            ),
            body,
          ),
        )
        : h("p", { class: "empty" }, "No attempts yet."),
    );
  }

  app.poll(async () => {
    const list = await api("GET", "/api/webhooks", { query: { topic } });
    if (!app.alive()) return;
    reconcile(tbody, list, (/** @type {any} */ w) => w.id, (w) => {
      const logBtn = h("button", { type: "button", class: "small" }, "Attempts");
      logBtn.setAttribute("aria-label", `Attempts of ${w.url}`);
      logBtn.addEventListener(
        "click",
        () => showLog(w.id, w.url).catch((e) => listStatus.error(e)),
      );
      const del = h("button", { type: "button", class: "small danger" }, "Delete");
      del.setAttribute("aria-label", `Delete webhook ${w.url}`);
      del.addEventListener("click", async () => {
        const ok = await confirmDialog({
          title: "Delete this webhook?",
          message:
            `${w.url} stops getting the messages of ${w.topic}; what it has not acked is dropped from its group.`,
          action: "Delete",
        });
        if (!ok) return;
        await act(del, listStatus, "Deleting…", async () => {
          await api("DELETE", `/api/webhooks/${encodeURIComponent(w.id)}`);
          tbody.querySelector(`tr[data-key="${CSS.escape(w.id)}"]`)?.remove();
          if (logFor === w.id) log.hidden = true;
          return `Deleted the webhook to ${w.url}`;
        });
      });
      return h(
        "tr",
        {},
        h("td", { class: "url" }, h("code", {}, w.url)),
        h("td", {}, h("a", { href: href("queue", w.topic) }, w.topic)),
        h("td", {}, w.signed ? "signed" : "unsigned"),
        h("td", {}, h("span", { class: "badge" })),
        h("td", { class: "num" }),
        h("td", {}),
        h("td", {}, h("div", { class: "buttons tight" }, logBtn, del)),
      );
    }, (tr, w) => {
      const c = /** @type {HTMLElement[]} */ ([...tr.children]);
      const badge = /** @type {HTMLElement} */ (c[3].firstChild);
      setText(badge, w.state);
      badge.className = `badge ${w.state === "active" ? "good" : "warn"}`;
      setText(c[4], String(w.pending));
      setText(c[5], attemptText(w.last_attempt));
      c[5].title = w.last_attempt?.error ?? "";
    });
    none.hidden = list.length > 0;
    if (logFor && !log.hidden) {
      const w = list.find((/** @type {any} */ x) => x.id === logFor);
      if (w) await showLog(w.id, w.url);
    }
  });

  return h(
    "div",
    { class: "view webhooks" },
    h("h1", {}, topic ? ["Webhooks of ", h("code", {}, topic)] : "Webhooks"),
    filterForm,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        {},
        h("caption", { class: "sr-only" }, "Webhooks"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["URL", "Topic", "Signature", "State"].map((x) => h("th", { scope: "col" }, x)),
            h("th", { scope: "col", class: "num" }, "Pending"),
            h("th", { scope: "col" }, "Last attempt"),
            h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
          ),
        ),
        tbody,
      ),
    ),
    none,
    listStatus.el,
    log,
    addForm(topic),
  );
}

/** The form that registers a webhook. @param {string} topic */
function addForm(topic) {
  const status = new StatusLine();
  const t = h("input", {
    id: "wh-topic",
    type: "text",
    value: topic,
    required: true,
    autocomplete: "off",
  });
  const url = h("input", {
    id: "wh-url",
    type: "url",
    required: true,
    placeholder: "https://example.com/hooks/orders",
    autocomplete: "off",
  });
  const secret = h("input", { id: "wh-secret", type: "password", autocomplete: "off" });
  const submit = h("button", { type: "submit", class: "primary" }, "Add webhook");
  const form = h(
    "form",
    { class: "card panel", "aria-labelledby": "add-h" },
    h("h2", { id: "add-h" }, "Add a webhook"),
    h("div", { class: "row" }, field("Topic", t), field("URL", url)),
    field(
      "Secret",
      secret,
      "Optional. Signs each POST (X-Ferry-Signature and Standard Webhooks); never shown again.",
    ),
    h("div", { class: "buttons" }, submit),
    status.el,
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    act(submit, status, "Adding…", async () => {
      const w = await api("POST", `/webhook/${encodeURIComponent(t.value.trim())}`, {
        json: secret.value
          ? { url: url.value.trim(), secret: secret.value }
          : { url: url.value.trim() },
      });
      url.value = "";
      secret.value = "";
      return `Added ${w.url} to ${w.topic} (${w.signed ? "signed" : "unsigned"})`;
    });
  });
  return form;
}
