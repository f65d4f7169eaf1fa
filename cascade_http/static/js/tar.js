// A tar archive (ustar; pax headers for long paths and sizes past 8 GiB) of picked files, as a
// Blob: headers are built here, file contents stay in their File objects and are read only
// as the upload sends them.

const BLOCK = 512;
const MAX_OCTAL_SIZE = 8 ** 11 - 1;
const utf8 = new TextEncoder();

function put(block, offset, length, text) {
  block.set(utf8.encode(text).subarray(0, length), offset);
}

function octal(n, width) {
  return n.toString(8).padStart(width - 1, "0");
}

function header(name, size, type, mtime) {
  const block = new Uint8Array(BLOCK);
  put(block, 0, 100, name);
  put(block, 100, 8, "0000644");
  put(block, 108, 8, "0000000");
  put(block, 116, 8, "0000000");
  put(block, 124, 12, octal(Math.min(size, MAX_OCTAL_SIZE), 12));
  put(block, 136, 12, octal(mtime, 12));
  put(block, 148, 8, "        ");
  put(block, 156, 1, type);
  put(block, 257, 6, "ustar");
  put(block, 263, 2, "00");
  const sum = block.reduce((a, b) => a + b, 0);
  put(block, 148, 8, `${octal(sum, 7)}\0 `);
  return block;
}

/** One pax record, "<length> key=value\n", whose length counts itself. */
function paxRecord(key, value) {
  const body = utf8.encode(` ${key}=${value}\n`).length;
  let length = body + 1;
  while (String(length).length + body !== length) length = String(length).length + body;
  return `${length} ${key}=${value}\n`;
}

function padding(size) {
  return new Uint8Array((BLOCK - (size % BLOCK)) % BLOCK);
}

/** A Blob holding `entries` ([{ path, file }]) as a tar archive. */
export function tarBlob(entries) {
  const parts = [];
  for (const { path, file } of entries) {
    const mtime = Math.floor((file.lastModified || Date.now()) / 1000);
    const name = utf8.encode(path);
    const needsPax = name.length > 100 || name.some((b) => b > 127) || file.size > MAX_OCTAL_SIZE;
    if (needsPax) {
      const records = paxRecord("path", path) + (file.size > MAX_OCTAL_SIZE ? paxRecord("size", String(file.size)) : "");
      const data = utf8.encode(records);
      parts.push(header("PaxHeader", data.length, "x", mtime), data, padding(data.length));
    }
    parts.push(header(needsPax ? path.slice(-99).replace(/[^\x20-\x7e]/g, "_") : path, file.size, "0", mtime), file, padding(file.size));
  }
  parts.push(new Uint8Array(BLOCK * 2));
  return new Blob(parts, { type: "application/x-tar" });
}
