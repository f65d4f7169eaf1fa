// A server-sent events client over fetch(), signed in by the session cookie (no token in the
// URL, where logs would keep it), sending `Last-Event-ID` itself: a dropped connection is
// reopened (with backoff) from the last event received, and a 204 answer means the stream has nothing more to send.

import { errorOf } from "./api.js";

const QUIET_MS = 45_000; // the server pings every 15 s; this long without a byte is a dead link

/**
 * Opens `url` and calls `onEvent(type, data, id)` for each event, `onStatus(status, info)`
 * with "connecting" | "open" | "reconnecting" | "ended" | "failed". Returns { close }.
 */
export function eventStream(url, { onEvent, onStatus }) {
  let lastId = null;
  let closed = false;
  let controller = null;
  let delay = 500;
  let timer = null;

  const status = (s, info) => !closed && onStatus?.(s, info);

  async function connect() {
    controller = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (lastId !== null) headers["Last-Event-ID"] = lastId;
    let watchdog = null;
    const feed = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), QUIET_MS);
    };
    try {
      status(lastId === null ? "connecting" : "reconnecting");
      const response = await fetch(url, { headers, signal: controller.signal, cache: "no-store" });
      if (response.status === 204) return status("ended");
      if (!response.ok) {
        const err = await errorOf(response);
        if (response.status < 500) return status("failed", err); // 401, 404: retrying will not help
        throw err;
      }
      status("open");
      delay = 500;
      feed();
      await read(response.body, (type, data, id) => {
        if (id !== null) lastId = id;
        onEvent(type, data, id);
      }, feed);
    } catch (err) {
      if (closed) return;
      status("reconnecting", err);
    } finally {
      clearTimeout(watchdog);
    }
    if (closed) return;
    // The server ended the stream, or the link broke: come back from the last event.
    timer = setTimeout(connect, delay);
    delay = Math.min(delay * 2, 8000);
  }

  connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      controller?.abort();
    },
    get lastEventId() {
      return lastId;
    },
  };
}

/** Reads an event-stream body to its end, calling `emit(type, parsedData, id)` per event. */
async function read(body, emit, onBytes) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let fields = { data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onBytes();
    buffer += value;
    let nl;
    while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
      if (nl === buffer.length - 1 && buffer.endsWith("\r")) break; // maybe half of a \r\n
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (fields.data.length) emit(fields.event ?? "message", JSON.parse(fields.data.join("\n")), fields.id ?? null);
        fields = { data: [] };
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (name === "data") fields.data.push(value);
        else if (name === "event" || name === "id") fields[name] = value;
      }
    }
  }
}
