// @ts-check
/**
 * The dashboard's shell: hash routes to views, polling that stops when a view goes, the
 * broker's health in the header, the API-key dialog, and the banner where background
 * failures show their problem detail.
 */

import { ApiError, apiKey, describeError, onUnauthorized, setApiKey } from "./api.js";
import { overview } from "./overview.js";
import { queueView } from "./queue.js";
import { deadLetters } from "./dlq.js";
import { webhooksView } from "./webhooks.js";
import { liveTail } from "./live.js";
import { setText } from "./ui.js";

/**
 * What a view gets from the shell.
 * @typedef {object} App
 * @property {(fn: () => Promise<void>, ms?: number) => void} poll runs `fn` now and then every `ms` after it settles, while the view is shown and the tab visible; failures go to the banner
 * @property {(fn: () => void) => void} onLeave runs when the view goes
 * @property {(err: unknown) => void} fail shows a failure in the banner
 * @property {(hash: string, notice?: string) => void} go another view, with a notice shown there
 * @property {() => boolean} alive false once the view is gone
 * @property {string | undefined} notice what the previous view left to say
 */

/** @typedef {(params: string[], app: App) => HTMLElement} View */

/** @type {Record<string, View>} */
const VIEWS = {
  "": overview,
  queue: queueView,
  dlq: deadLetters,
  webhooks: webhooksView,
  live: liveTail,
};
const NAV = { "": "overview", queue: "overview", dlq: "dlq", webhooks: "webhooks", live: "live" };

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
const main = $("main");
const banner = $("banner");
const bannerText = $("banner-text");
const bannerKey = /** @type {HTMLButtonElement} */ ($("banner-key"));
const keyDialog = /** @type {HTMLDialogElement} */ ($("key-dialog"));
const keyInput = /** @type {HTMLInputElement} */ ($("key-input"));
const keyWhy = $("key-why");
const keyButton = /** @type {HTMLButtonElement} */ ($("key-button"));

/** @type {(() => void)[]} */
let leaving = [];
/** @type {string | undefined} */
let pendingNotice;
let firstRoute = true;

/** Shows the view the hash names. */
function route() {
  for (const fn of leaving) fn();
  leaving = [];
  clearBanner();
  const hash = location.hash.replace(/^#\/?/, "");
  const [name = "", ...rest] = hash.split("/");
  let params;
  try {
    params = rest.map(decodeURIComponent);
  } catch {
    params = rest;
  }
  const view = VIEWS[name] ?? VIEWS[""];
  let alive = true;
  leaving.push(() => alive = false);
  /** @type {App} */
  const app = {
    poll(fn, ms = 2000) {
      /** @type {ReturnType<typeof setTimeout> | undefined} */
      let timer;
      const run = async () => {
        if (!alive) return;
        if (document.hidden) {
          timer = setTimeout(run, 1000);
          return;
        }
        try {
          await fn();
          if (alive) clearBanner();
        } catch (e) {
          if (alive) showBanner(e);
        }
        if (alive) timer = setTimeout(run, ms);
      };
      run();
      leaving.push(() => clearTimeout(timer));
    },
    onLeave: (fn) => leaving.push(fn),
    fail: showBanner,
    go(hash, notice) {
      pendingNotice = notice;
      location.hash = hash;
    },
    alive: () => alive,
    notice: pendingNotice,
  };
  pendingNotice = undefined;
  const el = view(params, app);
  main.replaceChildren(el);
  const current = NAV[/** @type {keyof NAV} */ (name)] ?? "overview";
  for (const a of document.querySelectorAll("nav a[data-view]")) {
    if (/** @type {HTMLElement} */ (a).dataset.view === current) {
      a.setAttribute("aria-current", "page");
    } else a.removeAttribute("aria-current");
  }
  const h1 = main.querySelector("h1");
  if (h1) document.title = `${h1.textContent} · Ferry`;
  // After a navigation (not the first load), keyboard and screen-reader users land on the view.
  if (!firstRoute && h1) {
    h1.tabIndex = -1;
    h1.focus();
  }
  firstRoute = false;
}

/** @param {unknown} err */
function showBanner(err) {
  bannerText.textContent = describeError(err);
  bannerKey.hidden = !(err instanceof ApiError && (err.status === 401 || err.status === 403));
  banner.hidden = false;
}

function clearBanner() {
  banner.hidden = true;
  bannerText.textContent = "";
}

/** True once the person closed the key dialog without a key: it then opens only when asked. */
let keyDeclined = false;

/** Opens the key dialog, saying why. @param {string} [why] */
function askForKey(why) {
  if (keyDialog.open) return;
  keyWhy.textContent = why ??
    "Enter the API key to use for this tab. The broker checks it on every data request.";
  keyInput.value = "";
  keyInput.setCustomValidity("");
  $("key-forget").hidden = !apiKey();
  keyDialog.showModal();
  keyInput.focus();
}

onUnauthorized((err) => {
  if (!keyDeclined) askForKey(`The broker needs an API key: ${err.detail}`);
});

$("key-form").addEventListener("submit", (e) => {
  const submitter =
    /** @type {HTMLButtonElement | null} */ (/** @type {SubmitEvent} */ (e).submitter);
  if (submitter?.value === "ok" && !keyInput.value.trim()) {
    e.preventDefault();
    keyInput.setCustomValidity("Enter a key, or Cancel");
    keyInput.reportValidity();
  }
});
keyInput.addEventListener("input", () => keyInput.setCustomValidity(""));
keyDialog.addEventListener("close", () => {
  const choice = keyDialog.returnValue;
  keyDialog.returnValue = "";
  if (choice === "ok") {
    setApiKey(keyInput.value.trim());
    keyDeclined = false;
  } else if (choice === "forget") {
    setApiKey("");
  } else {
    keyDeclined = true;
    return;
  }
  keyInput.value = "";
  updateKeyButton();
  route(); // everything again, with the new key
});

function updateKeyButton() {
  keyButton.textContent = apiKey() ? "API key ✓" : "API key";
  keyButton.setAttribute(
    "aria-label",
    apiKey() ? "API key (one is set for this tab)" : "API key (none set)",
  );
}

keyButton.addEventListener("click", () => askForKey());
bannerKey.addEventListener("click", () => askForKey());
$("skip").addEventListener("click", (e) => {
  e.preventDefault();
  main.focus();
});

/** The header's health pill, from the public /healthz. */
async function health() {
  const pill = $("health");
  try {
    const res = await fetch("/healthz");
    /** @type {any} */
    const body = await res.json().catch(() => ({}));
    const ok = res.ok && body.status === "ok";
    pill.className = `pill ${ok ? "ok" : "bad"}`;
    // Only a change is written, so screen readers hear the pill when the health changes.
    setText(pill, ok ? `healthy · v${body.version}` : `${body.status ?? res.status}`);
    pill.title = ok
      ? `Ferry ${body.version}, up ${body.uptime_seconds} s`
      : `/healthz answered ${res.status}`;
  } catch (e) {
    pill.className = "pill bad";
    setText(pill, "unreachable");
    pill.title = String(e);
  }
}

globalThis.addEventListener("hashchange", route);
updateKeyButton();
route();
health();
setInterval(() => {
  if (!document.hidden) health();
}, 5000);
