// @ts-check
/**
 * Small DOM helpers: building elements (text always as text, never as HTML), keyed row
 * updates that keep focus where it is, status lines, and the confirmation dialogs.
 */

import { describeError } from "./api.js";

/** @typedef {Node | string | number | null | undefined | false | ChildList} Child */
/** @typedef {Array<Child>} ChildList */

/**
 * An element with properties, attributes, listeners (`onclick`) and children.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, unknown>} [props]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), /** @type {EventListener} */ (v));
    } else if (k === "class") {
      el.className = String(v);
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else if (typeof v !== "string" && k in el) {
      /** @type {any} */ (el)[k] = v;
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

/** Appends children (nested arrays, text, numbers; falsy ones skipped). @param {Element} el @param {Child[]} children */
export function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(typeof c === "number" ? String(c) : c);
  }
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element with attributes. @param {string} tag @param {Record<string, string | number>} [attrs] @returns {SVGElement} */
export function svg(tag, attrs = {}) {
  const el = /** @type {SVGElement} */ (document.createElementNS(SVG_NS, tag));
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** Sets an element's text only when it changed (no needless layout). @param {Element} el @param {string} text */
export function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

/**
 * Makes `parent`'s children the rows of `items`, in order, reusing the row of each key: rows
 * are updated in place and moved only when the order changed, so focus inside them survives.
 * @template T
 * @param {Element} parent
 * @param {T[]} items
 * @param {(item: T) => string} keyOf
 * @param {(item: T) => HTMLElement} create
 * @param {(el: HTMLElement, item: T) => void} update
 */
export function reconcile(parent, items, keyOf, create, update) {
  /** @type {Map<string, HTMLElement>} */
  const existing = new Map();
  for (const el of /** @type {HTMLElement[]} */ ([...parent.children])) {
    if (el.dataset.key !== undefined) existing.set(el.dataset.key, el);
    else el.remove();
  }
  let at = /** @type {Element | null} */ (parent.firstElementChild);
  for (const item of items) {
    const key = keyOf(item);
    let el = existing.get(key);
    if (el) existing.delete(key);
    else {
      el = create(item);
      el.dataset.key = key;
    }
    update(el, item);
    if (at === el) at = el.nextElementSibling;
    else parent.insertBefore(el, at);
  }
  for (const el of existing.values()) el.remove();
}

/**
 * A status line for the outcome of an action: `ok`, `error` (the problem detail) or `busy`.
 * Announced to screen readers as it changes.
 */
export class StatusLine {
  constructor() {
    this.el = h("p", { class: "status", role: "status", "aria-live": "polite" });
  }
  /** @param {string} text */
  ok(text) {
    this.#set("ok", text);
  }
  /** @param {unknown} err */
  error(err) {
    this.#set("error", describeError(err));
  }
  /** @param {string} text */
  busy(text) {
    this.#set("busy", text);
  }
  clear() {
    this.#set("", "");
  }
  /** @param {string} kind @param {string} text */
  #set(kind, text) {
    this.el.className = `status ${kind}`;
    this.el.textContent = text;
  }
}

/**
 * Runs `fn` for a button: disabled while it runs, its outcome on `status`.
 * @param {HTMLButtonElement | null} button
 * @param {StatusLine} status
 * @param {string} busyText
 * @param {() => Promise<string | void>} fn resolves with the success text
 */
export async function act(button, status, busyText, fn) {
  if (button) button.disabled = true;
  status.busy(busyText);
  try {
    const text = await fn();
    if (text) status.ok(text);
    else status.clear();
  } catch (e) {
    status.error(e);
  } finally {
    if (button) button.disabled = false;
  }
}

/**
 * A modal dialog that asks to confirm; with `typeName`, the confirm button stays disabled until
 * that name is typed. Resolves true when confirmed.
 * @param {{ title: string, message: string, action: string, typeName?: string }} opts
 * @returns {Promise<boolean>}
 */
export function confirmDialog(opts) {
  return new Promise((resolve) => {
    const input = opts.typeName === undefined ? null : h("input", {
      id: "confirm-name",
      type: "text",
      autocomplete: "off",
      spellcheck: false,
      required: true,
    });
    const confirm = h("button", {
      type: "submit",
      value: "ok",
      class: "danger",
      disabled: input !== null,
    }, opts.action);
    const form = h(
      "form",
      { method: "dialog" },
      h("h2", { id: "confirm-title" }, opts.title),
      h("p", { id: "confirm-message" }, opts.message),
      input && [
        h("label", { for: "confirm-name" }, "Type ", h("code", {}, opts.typeName), " to confirm"),
        input,
      ],
      h(
        "div",
        { class: "buttons" },
        h("button", { type: "submit", value: "cancel", formnovalidate: true }, "Cancel"),
        confirm,
      ),
    );
    const dialog = h("dialog", {
      class: "confirm",
      "aria-labelledby": "confirm-title",
      "aria-describedby": "confirm-message",
    }, form);
    input?.addEventListener("input", () => {
      confirm.disabled = input.value !== opts.typeName;
    });
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok" && (!input || input.value === opts.typeName));
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
    (input ?? confirm).focus();
  });
}

/** A table whose header cells are given; returns the table and its body. @param {string} caption @param {(string | HTMLElement)[]} heads @param {string[]} [numeric] */
export function table(caption, heads, numeric = []) {
  const tbody = h("tbody");
  const t = h(
    "table",
    {},
    h("caption", { class: "sr-only" }, caption),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        heads.map((x) =>
          h("th", {
            scope: "col",
            class: typeof x === "string" && numeric.includes(x) ? "num" : "",
          }, x)
        ),
      ),
    ),
    tbody,
  );
  return { table: h("div", { class: "table-wrap" }, t), tbody };
}

/** A row of cells; numbers and classes by index. @param {Child[]} cells @param {number[]} [numeric] */
export function row(cells, numeric = []) {
  return h("tr", {}, cells.map((c, i) => h("td", { class: numeric.includes(i) ? "num" : "" }, c)));
}

/**
 * A labelled form field; `narrow` keeps the control at its own width.
 * @param {string} label @param {HTMLElement} control @param {string} [hint] @param {boolean} [narrow]
 */
export function field(label, control, hint, narrow = false) {
  const id = control.id || (control.id = `f-${Math.random().toString(36).slice(2, 9)}`);
  const hintEl = hint ? h("span", { class: "hint", id: `${id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h(
    "div",
    { class: narrow ? "field narrow" : "field" },
    h("label", { for: id }, label),
    control,
    hintEl,
  );
}

/** A short form of a UUID for tables (the full id in the title). @param {string} id */
export function shortId(id) {
  return h("code", { title: id, class: "id" }, id.length > 13 ? `…${id.slice(-12)}` : id);
}

/** The hash link of a view. @param {...string} parts */
export function href(...parts) {
  return `#/${parts.map(encodeURIComponent).join("/")}`;
}
