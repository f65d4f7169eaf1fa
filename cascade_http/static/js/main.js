// The app's frame: sign-in, hash routes, the header's navigation and service health.

import { api, onUnauthorized, session } from "./api.js";
import { clear, h, markCurrent } from "./dom.js";
import { counted, integer } from "./format.js";
import { mountRuns } from "./views/runs.js";
import { mountNewRun } from "./views/newrun.js";
import { mountRun } from "./views/run.js";
import { mountTraces } from "./views/traces.js";
import { mountRunners } from "./views/runners.js";
import { mountConfigs } from "./views/configs.js";
import { mountApiDocs } from "./views/apidocs.js";
import { mountCampaign, mountCampaigns } from "./views/campaigns.js";
import { mountSignIn } from "./views/signin.js";
import { mountSimLink } from "./views/simlink.js";

// A view is mount(element, params, query) -> { update?(params, query), destroy?() }.
// Routes with the same key (the tabs of one run) update the mounted view instead of
// remounting it, so the run's live stream carries on.
const ROUTES = [
  { re: /^\/runs$/, nav: "runs", mount: mountRuns },
  { re: /^\/runs\/new$/, nav: "runs", mount: mountNewRun },
  {
    re: /^\/runs\/([^/]+)(?:\/(timeline|compare|stats))?$/,
    nav: "runs",
    mount: mountRun,
    params: (m) => ({ id: decodeURIComponent(m[1]), tab: m[2] ?? "sims" }),
    key: (p) => `run:${p.id}`,
  },
  { re: /^\/sims\/([^/]+)$/, nav: "runs", mount: mountSimLink, params: (m) => ({ id: decodeURIComponent(m[1]) }) },
  { re: /^\/traces$/, nav: "traces", mount: mountTraces },
  { re: /^\/runners$/, nav: "runners", mount: mountRunners },
  { re: /^\/configs$/, nav: "configs", mount: mountConfigs },
  { re: /^\/api$/, nav: "api", mount: mountApiDocs },
  { re: /^\/campaigns$/, nav: "campaigns", mount: mountCampaigns },
  {
    re: /^\/campaigns\/([^/]+)$/,
    nav: "campaigns",
    mount: mountCampaign,
    params: (m) => ({ name: decodeURIComponent(m[1]) }),
    key: (p) => `campaign:${p.name}`,
  },
];

const SIGNIN_LINK = "#signin="; // the link `cascade serve` prints: #signin=<one-time code>
const main = document.getElementById("main");
let current = null; // { key, view }

function leave() {
  current?.view.destroy?.();
  current = null;
}

function setNav(name) {
  markCurrent(document.querySelectorAll("[data-nav]"), (link) => link.dataset.nav === name);
  document.getElementById("signout").hidden = !session.signedIn;
}

function route() {
  if (location.hash.startsWith(SIGNIN_LINK)) return start();
  if (!session.signedIn) return signIn();
  const hash = location.hash;
  if (!hash.startsWith("#/")) return location.replace("#/runs");
  const [path, qs] = hash.slice(1).split("?");
  const query = new URLSearchParams(qs ?? "");
  for (const r of ROUTES) {
    const m = r.re.exec(path);
    if (!m) continue;
    const params = r.params ? r.params(m) : {};
    const key = r.key ? r.key(params) : path;
    setNav(r.nav);
    if (current?.key === key && current.view.update) {
      current.view.update(params, query);
    } else {
      leave();
      clear(main);
      current = { key, view: r.mount(main, params, query) ?? {} };
      main.focus({ preventScroll: true });
      window.scrollTo(0, 0);
    }
    return;
  }
  leave();
  setNav(null);
  document.title = "Not found · Cascade";
  clear(main, h("div", { class: "page" }, h("h1", {}, "Page not found"), h("p", {}, h("a", { href: "#/runs" }, "Go to the runs"))));
}

function signIn(message) {
  leave();
  setNav(null);
  clear(main);
  current = { key: "signin", view: mountSignIn(main, { message, done: route }) };
}

onUnauthorized((message) => {
  if (current?.key === "signin") return; // the sign-in form says so itself
  session.signedIn = false;
  signIn(`Signed out: ${message}`);
});

document.getElementById("signout").addEventListener("click", async () => {
  try {
    await session.signOut();
  } catch {
    // a session the server no longer has (it restarted) is signed out all the same
  }
  signIn();
});

/** Signs this browser in with the one-time code of the link `cascade serve` printed, if the
 * address holds one: taken out of the address bar and its history first, as it is used up. */
async function tradeSignInCode() {
  if (!location.hash.startsWith(SIGNIN_LINK)) return undefined;
  const code = decodeURIComponent(location.hash.slice(SIGNIN_LINK.length));
  history.replaceState(null, "", `${location.pathname}${location.search}#/runs`);
  try {
    await session.signIn({ code });
    return undefined;
  } catch (err) {
    return err.message;
  }
}

async function start() {
  const refused = await tradeSignInCode();
  // A browser signed in before (another tab, an earlier visit) needs no code.
  if (session.signedIn || (await session.check())) return route();
  signIn(refused);
}

document.getElementById("skip").addEventListener("click", (e) => {
  e.preventDefault();
  main.focus();
});

// --- service health, in the header ---

const health = document.getElementById("health");

async function checkHealth() {
  try {
    const hl = await api("/api/health");
    const lag = hl.stream_seq - hl.projected_seq;
    health.className = `health ${hl.runners ? "ok" : "warn"}`;
    health.title = `Event log at ${integer(hl.stream_seq)}, read model at ${integer(hl.projected_seq)}`;
    clear(
      health,
      h("span", { class: "dot", "aria-hidden": "true" }),
      h("span", { class: "health-text" }, h("span", {}, counted(hl.runners, "runner")), " · ", h("span", {}, `${integer(hl.queue_depth)} queued`)),
      lag > 0 ? h("span", { class: "health-lag" }, ` · ${integer(lag)} behind`) : "", // a phone has no room for it: the title says it
      hl.parked ? h("span", { class: "health-parked" }, ` · ${integer(hl.parked)} parked`) : "",
    );
  } catch {
    health.className = "health down";
    clear(health, h("span", { class: "dot", "aria-hidden": "true" }), "server unreachable");
  }
}

setInterval(() => document.hidden || checkHealth(), 15_000);
document.addEventListener("visibilitychange", () => document.hidden || checkHealth());
window.addEventListener("hashchange", route);
checkHealth();
start();
