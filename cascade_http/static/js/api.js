// The Cascade API as the app uses it: the bearer token kept for this tab, JSON requests,
// errors carrying the API's own `detail`, and downloads that need the token.

const KEY = "cascade.token";
const unauthorized = new EventTarget();

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

/** Called with the API's message when a request is refused for its token. */
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

export function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${token.get() ?? ""}`, ...extra };
}

export async function errorOf(response) {
  let detail = response.statusText || `HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.detail !== undefined) detail = body.detail;
  } catch {
    // not JSON: keep the status text
  }
  if (response.status === 401) unauthorized.dispatchEvent(new CustomEvent("401", { detail: ApiError.describe(detail) }));
  return new ApiError(response.status, detail);
}

/** fetch() with the token; resolves to the Response once it is OK, else throws ApiError. */
export async function request(path, { method = "GET", json, headers = {}, signal } = {}) {
  const init = { method, signal, headers: authHeaders(headers) };
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
  if (!response.ok) throw await errorOf(response);
  return response;
}

/** The JSON body of a request (null for 204). */
export async function api(path, options) {
  const response = await request(path, options);
  return response.status === 204 ? null : response.json();
}

function filenameOf(response, fallback) {
  const header = response.headers.get("Content-Disposition") ?? "";
  const match = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(header);
  return match ? decodeURIComponent(match[1]) : fallback;
}

/** Downloads what `path` answers as a file, under the name the server gives it. */
export async function download(path, fallbackName) {
  const response = await request(path);
  saveBlob(await response.blob(), filenameOf(response, fallbackName));
}

/** `blob` saved by the browser as a download named `name`. */
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

export const enc = encodeURIComponent;

/** Whether POST /api/runs would take `trace`: a ready one that is not a sample (samples hold no instruction traces). */
export function runnable(trace) {
  return trace.state === "ready" && !trace.sample;
}
