// @ts-check
/**
 * Live tail: the messages of a topic as they are stored, over server-sent events (an
 * EventSource; the key goes as `?api_key=` because EventSource cannot send headers). Pause
 * holds new events aside, the filter hides what does not match, and the list keeps the newest
 * MAX_SHOWN only.
 */

import { apiKey, authHeaders, describeError, problemOf, urlOf } from "./api.js";
import { clock, num, preview } from "./format.js";
import { messageCard } from "./message.js";
import { field, h, href, setText, shortId } from "./ui.js";

/** Events kept in the list (and held while paused); older ones drop off. */
const MAX_SHOWN = 200;

/** @param {string[]} params @param {import("./app.js").App} app */
export function liveTail(params, app) {
  const topic = params[0] ?? "";
  const topicInput = h("input", {
    id: "live-topic",
    type: "text",
    value: topic,
    required: true,
    autocomplete: "off",
  });
  const start = h("button", { type: "submit", class: "primary" }, topic ? "Tail another" : "Start");
  const form = h(
    "form",
    { class: "toolbar" },
    field("Topic", topicInput),
    h("div", { class: "buttons end" }, start),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const t = topicInput.value.trim();
    if (t) location.hash = href("live", t);
  });

  const view = h(
    "div",
    { class: "view live" },
    h("h1", {}, topic ? ["Live tail of ", h("code", {}, topic)] : "Live tail"),
    form,
  );
  if (!topic) {
    view.append(
      h(
        "p",
        { class: "muted" },
        "Every message stored in the topic shows up here as it arrives; nothing is consumed.",
      ),
    );
    return view;
  }

  const state = h("span", { class: "pill" }, "connecting…");
  const counts = h("span", { class: "muted", "aria-live": "off" });
  const pause = h("button", { type: "button", "aria-pressed": "false" }, "Pause");
  const clear = h("button", { type: "button" }, "Clear");
  const filter = h("input", {
    id: "live-filter",
    type: "search",
    autocomplete: "off",
    placeholder: "text in payload, id or headers",
  });
  const list = h("ol", { class: "events", "aria-label": "Messages, newest first", reversed: true });
  const none = h("p", { class: "empty" }, "Waiting for messages…");
  const notice = h("p", { class: "status", role: "status" });
  const detail = h("div", { class: "result" });
  view.append(
    h(
      "div",
      { class: "toolbar" },
      h("div", { class: "field inline" }, h("span", { class: "label" }, "Stream"), state),
      field("Filter", filter),
      h("div", { class: "buttons end" }, pause, clear),
    ),
    counts,
    notice,
    none,
    list,
    detail,
  );

  let received = 0;
  let paused = false;
  /** @type {{ seq: string, msg: import("./message.js").Message }[]} */
  let held = [];

  /** @param {{ seq: string, msg: import("./message.js").Message }} e */
  function matches(e) {
    const needle = filter.value.trim().toLowerCase();
    if (!needle) return true;
    const m = e.msg;
    return [m.id, m.payload_text ?? "", JSON.stringify(m.headers)].some((s) =>
      s.toLowerCase().includes(needle)
    );
  }

  /** @param {{ seq: string, msg: import("./message.js").Message }} e */
  function item(e) {
    const m = e.msg;
    const show = h(
      "button",
      { type: "button", class: "small", "aria-label": `Show ${m.id}` },
      "Show",
    );
    show.addEventListener("click", () => detail.replaceChildren(messageCard(m)));
    const li = h(
      "li",
      { class: "event" },
      h("span", { class: "when" }, clock(m.timestamp)),
      h("span", { class: "seq" }, e.seq ? `#${e.seq}` : "broadcast"),
      shortId(m.id),
      h("span", { class: "payload-cell" }, preview(m, 120)),
      m.retry_count ? h("span", { class: "badge warn" }, `retry ${m.retry_count}`) : null,
      show,
    );
    /** @type {any} */ (li).entry = e;
    li.hidden = !matches(e);
    return li;
  }

  function updateCounts() {
    const shown =
      [...list.children].filter((li) => !(/** @type {HTMLElement} */ (li)).hidden).length;
    setText(
      counts,
      `${num(received)} received · ${num(shown)} shown${
        paused ? ` · ${num(held.length)} held while paused` : ""
      }`,
    );
    none.hidden = list.children.length > 0;
  }

  /** @param {{ seq: string, msg: import("./message.js").Message }} e */
  function add(e) {
    received++;
    if (paused) {
      held.push(e);
      if (held.length > MAX_SHOWN) held.shift();
    } else {
      list.prepend(item(e));
      while (list.children.length > MAX_SHOWN) list.lastElementChild?.remove();
    }
    updateCounts();
  }

  pause.addEventListener("click", () => {
    paused = !paused;
    pause.setAttribute("aria-pressed", String(paused));
    setText(pause, paused ? "Resume" : "Pause");
    if (!paused) {
      for (const e of held) list.prepend(item(e));
      held = [];
      while (list.children.length > MAX_SHOWN) list.lastElementChild?.remove();
    }
    updateCounts();
  });
  clear.addEventListener("click", () => {
    list.replaceChildren();
    held = [];
    detail.replaceChildren();
    updateCounts();
  });
  filter.addEventListener("input", () => {
    for (const li of list.children) {
      /** @type {HTMLElement} */ (li).hidden = !matches(/** @type {any} */ (li).entry);
    }
    updateCounts();
  });

  const path = `/stream/${encodeURIComponent(topic)}`;
  const key = apiKey();
  const es = new EventSource(urlOf(path, { api_key: key || undefined }));
  app.onLeave(() => es.close());
  es.addEventListener("open", () => {
    state.className = "pill ok";
    setText(state, "live");
    setText(notice, "");
  });
  es.addEventListener("message", (ev) => {
    try {
      add({ seq: ev.lastEventId, msg: JSON.parse(ev.data) });
    } catch (e) {
      setText(notice, `An event could not be read: ${describeError(e)}`);
    }
  });
  es.addEventListener("reset", (ev) => {
    let missed;
    try {
      missed = JSON.parse(ev.data).missed;
    } catch { /* no count then */ }
    notice.className = "status error";
    setText(
      notice,
      `The stream missed ${
        typeof missed === "number" ? `${missed} message${missed === 1 ? "" : "s"}` : "messages"
      } (acked, expired or dropped before it could show them); the rest follow.`,
    );
  });
  es.addEventListener("shutdown", () => {
    state.className = "pill warn";
    setText(state, "reconnecting…");
    notice.className = "status";
    setText(notice, "The broker is restarting; the stream resumes where it stopped.");
  });
  es.addEventListener("error", async () => {
    if (es.readyState === EventSource.CONNECTING) {
      state.className = "pill warn";
      setText(state, "reconnecting…");
      return;
    }
    state.className = "pill bad";
    setText(state, "closed");
    // EventSource hides why it failed: ask once more with fetch to read the problem body.
    const ac = new AbortController();
    try {
      const res = await fetch(path, { headers: authHeaders(), signal: ac.signal });
      if (res.ok) {
        ac.abort();
        notice.className = "status error";
        setText(notice, "The stream closed. Reload the view to tail again.");
      } else {
        const err = await problemOf(res);
        notice.className = "status error";
        setText(notice, `The stream was refused: ${describeError(err)}`);
      }
    } catch (e) {
      notice.className = "status error";
      setText(notice, `The stream closed: ${describeError(e)}`);
    }
  });
  updateCounts();
  return view;
}
