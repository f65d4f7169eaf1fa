// The Cascade API as the app uses it: the browser's session (an HttpOnly cookie the server
// sets once for the token or a sign-in code, sent with every request of every tab, out of
// scripts' reach), JSON requests, errors carrying the API's own `detail`, and downloads.

const unauthorized = new EventTarget();

/** Called with the API's message when a request is refused for want of a session. */
export function onUnauthorized(fn) {
  unauthorized.addEventListener("401", (e) => fn(e.detail));
}

export class ApiError extends Error {
  /** `detail` is the API's: a sentence, or a list of validation issues. */
  constructor(status, detail) {
    super(ApiError.describe(detail) || `HTTP ${status}`);
    this.status = status;
    this.detail = detail;
  }

  static describe(detail) {
    if (Array.isArray(detail)) return detail.map((issue) => issue.msg).join("; ");
    return typeof detail === "string" ? detail : "";
  }

  /** The validation issues, when the API answered with a list. */
  get issues() {
    return Array.isArray(this.detail) ? this.detail : [];
  }
}

/** The ApiError a refused response carries; a 401 also tells the app that it is signed out. */
export async function errorOf(response) {
  const err = await refusalOf(response);
  if (response.status === 401) unauthorized.dispatchEvent(new CustomEvent("401", { detail: err.message }));
  return err;
}

async function refusalOf(response) {
  let detail = response.statusText || `HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.detail !== undefined) detail = body.detail;
  } catch {
    // not JSON: keep the status text
  }
  return new ApiError(response.status, detail);
}

/**
 * fetch() with the session cookie; resolves to the Response once it is OK, else throws
 * ApiError. `signingIn`: a 401 is the answer to this request alone, not a lost session.
 */
export async function request(path, { method = "GET", json, headers = {}, signal, signingIn = false } = {}) {
  const init = { method, signal, headers: { ...headers } };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "The server cannot be reached. Is `cascade serve` running?");
  }
  if (!response.ok) throw signingIn ? await refusalOf(response) : await errorOf(response);
  return response;
}

/** This browser's session: whether it is signed in (the server says: the cookie is out of reach). */
export const session = {
  signedIn: false,

  async check() {
    try {
      this.signedIn = (await fetch("/api/session", { cache: "no-store" })).ok;
    } catch {
      this.signedIn = false;
    }
    return this.signedIn;
  },

  /** Signs every tab of this browser in, for `{ token }` or `{ code }`; throws ApiError if refused. */
  async signIn(proof) {
    await request("/api/session", { method: "POST", json: proof, signingIn: true });
    this.signedIn = true;
  },

  async signOut() {
    this.signedIn = false;
    await request("/api/session", { method: "DELETE", signingIn: true });
  },
};

/** The JSON body of a request (null for 204). */
export async function api(path, options) {
  const response = await request(path, options);
  return response.status === 204 ? null : response.json();
}

/** What `path` answers, downloaded by the browser itself: streamed to disk as it comes (a
 * run's results or export may be gigabytes, more than a page should hold), the session
 * cookie its credentials, under the name the server gives it (`name` failing that). An
 * answer that fails, before its first byte or after, shows as a failed download in the
 * browser's own list. */
export function download(path, name) {
  saveUrl(path, name);
}

/** `blob`, made in the page, saved by the browser as a download named `name`. */
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  saveUrl(url, name);
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function saveUrl(url, name) {
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
}

export const enc = encodeURIComponent;

/** Whether POST /api/runs would take `trace`: a ready one that is not a sample (samples hold no instruction traces). */
export function runnable(trace) {
  return trace.state === "ready" && !trace.sample;
}
