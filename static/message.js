// @ts-check
/**
 * A message as a card: its figures, headers and payload, which can be shown as JSON
 * (pretty-printed), text, hex or Base64.
 */

import { dateTime, num, payloadForms, shown } from "./format.js";
import { h } from "./ui.js";

/**
 * @typedef {object} Message
 * @property {string} id
 * @property {string} topic
 * @property {string} payload
 * @property {string} [payload_text]
 * @property {string} timestamp
 * @property {number} retry_count
 * @property {Record<string, string>} headers
 * @property {string} priority
 * @property {string} [expires_at]
 * @property {string} [group]
 * @property {string} [reason]
 * @property {number} [redrive_count]
 * @property {string} [lease_ends_at]
 */

const LABELS = { json: "JSON", text: "Text", hex: "Hex", base64: "Base64" };

/**
 * The payload with a choice of forms (a group of toggle buttons).
 * @param {Message} msg
 */
export function payloadView(msg) {
  const { forms, best, size } = payloadForms(msg);
  const pre = h("pre", { class: "payload", tabindex: 0 });
  const buttons = /** @type {HTMLButtonElement[]} */ ([]);
  const show = (/** @type {string} */ form) => {
    pre.textContent = shown(forms[form] ?? "");
    pre.setAttribute("aria-label", `Payload as ${LABELS[/** @type {keyof LABELS} */ (form)]}`);
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.value === form));
  };
  for (const form of Object.keys(LABELS)) {
    if (forms[form] === undefined) continue;
    buttons.push(
      h("button", {
        type: "button",
        class: "small",
        value: form,
        onclick: () => show(form),
      }, LABELS[/** @type {keyof LABELS} */ (form)]),
    );
  }
  show(best);
  return h(
    "div",
    { class: "payload-view" },
    h(
      "div",
      { class: "payload-bar" },
      h("span", { class: "muted" }, `Payload, ${num(size)} bytes`),
      h("span", { class: "toggles", role: "group", "aria-label": "Show payload as" }, buttons),
    ),
    pre,
  );
}

/**
 * A message's card; `actions` go in its footer.
 * @param {Message} msg
 * @param {Node[]} [actions]
 */
export function messageCard(msg, actions = []) {
  const facts = [
    ["Id", h("code", {}, msg.id)],
    ["Published", dateTime(msg.timestamp)],
    ["Priority", msg.priority],
    ["Retry count", String(msg.retry_count)],
  ];
  if (msg.group !== undefined) facts.push(["Group", msg.group === "" ? "(default)" : msg.group]);
  if (msg.reason) facts.push(["Reason", msg.reason]);
  if (msg.redrive_count) facts.push(["Redriven", `${msg.redrive_count}×`]);
  if (msg.expires_at) facts.push(["Expires", dateTime(msg.expires_at)]);
  if (msg.lease_ends_at) facts.push(["Lease ends", dateTime(msg.lease_ends_at)]);
  const headers = Object.entries(msg.headers ?? {});
  return h(
    "article",
    { class: "message", "aria-label": `Message ${msg.id}` },
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    headers.length
      ? h(
        "details",
        { class: "headers", open: true },
        h("summary", {}, `Headers (${headers.length})`),
        h(
          "dl",
          { class: "facts" },
          headers.map(([k, v]) => [h("dt", {}, k), h("dd", {}, h("code", {}, v))]),
        ),
      )
      : h("p", { class: "muted small" }, "No X-MQ-* headers"),
    payloadView(msg),
    actions.length ? h("div", { class: "buttons" }, actions) : null,
  );
}
