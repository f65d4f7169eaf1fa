// A virtualised table: however many rows, only those in view (plus a margin) are in the DOM,
// so a 10,000-kernel run scrolls smoothly. ARIA table roles keep it a table to assistive
// technology (aria-rowcount / aria-rowindex say where the rendered rows are).

import { h, perFrame } from "./dom.js";

const OVERSCAN = 8;

/** A column's grid track widened to at least `need` px, and its minimum width. */
function track(width, need) {
  const [, min, max] = /^minmax\((.+?),(.+)\)$/.exec(width.replace(/\s+/g, "")) ?? [null, width, width];
  if (!need) return { track: width, min };
  const wide = `max(${min}, ${need}px)`;
  return { track: min === max ? wide : `minmax(${wide}, ${max})`, min: wide };
}

/** "3 rows", or where the view is among many: "rows 1–14 of 10,000 · scroll for more". */
function footText(total, first, shown) {
  if (total <= shown || shown <= 0) return `${total.toLocaleString("en-US")} ${total === 1 ? "row" : "rows"}`;
  const last = Math.min(total, first + shown);
  return `rows ${(first + 1).toLocaleString("en-US")}–${last.toLocaleString("en-US")} of ${total.toLocaleString("en-US")}${last < total ? " · scroll for more" : ""}`;
}

/**
 * columns: [{ title, cell(row, i) -> string | Node, width: CSS grid track, num?: bool, data?(row) -> attrs }]
 * Returns { el, setRows(rows), setColumns(columns) }.
 */
export function virtualTable({ label, columns, rowHeight = 30, maxHeight = 420, id, rowData }) {
  let rows = [];
  let cols = columns;
  const head = h("div", { class: "vt-head", role: "row", "aria-rowindex": "1" });
  const spacer = h("div", { class: "vt-spacer" });
  const body = h("div", { class: "vt-body", tabindex: "0", role: "rowgroup", "aria-label": `${label}, scrollable` }, spacer);
  const table = h("div", { class: "vt", role: "table", "aria-label": label, id }, head, body);
  // How many rows it holds, and which are in view when it scrolls: a box of fixed height
  // shows no more than its first rows otherwise.
  const foot = h("div", { class: "vt-foot", "aria-live": "polite" });
  const el = h("div", {}, h("div", { class: "vt-wrap" }, table), foot);

  let headWidths = null; // px each header needs, measured once the table is laid out

  function layout() {
    head.replaceChildren(...cols.map((c) => h("div", { role: "columnheader", class: c.num ? "num" : "" }, c.title)));
    headWidths = null;
    size();
  }

  // Every column at least as wide as its header, so no title is cut ("vs SM61_TITANX"), and
  // the table at least as wide as its columns (it scrolls sideways on a phone).
  function size() {
    const tracks = cols.map((c, i) => track(c.width ?? "minmax(6rem, 1fr)", headWidths?.[i]));
    table.style.setProperty("--vt-cols", tracks.map((t) => t.track).join(" "));
    table.style.setProperty("--vt-min", `calc(${tracks.map((t) => t.min).join(" + ")})`);
    table.style.setProperty("--vt-row", `${rowHeight}px`);
  }

  function measureHead() {
    if (headWidths || !head.offsetWidth) return; // not shown yet: measured when it is
    // A hidden copy of the header row, each title at its own width, unclipped.
    const probe = head.cloneNode(true);
    probe.style.cssText = "position:absolute;visibility:hidden;display:flex;width:max-content";
    probe.setAttribute("aria-hidden", "true");
    head.after(probe);
    headWidths = [...probe.children].map((cell) => Math.ceil(cell.getBoundingClientRect().width));
    probe.remove();
    size();
  }

  const render = perFrame(() => {
    measureHead();
    const total = rows.length;
    table.setAttribute("aria-rowcount", String(total + 1));
    spacer.style.height = `${total * rowHeight}px`;
    body.style.height = `${Math.min(maxHeight, Math.max(rowHeight, total * rowHeight))}px`;
    const first = Math.max(0, Math.floor(body.scrollTop / rowHeight) - OVERSCAN);
    const last = Math.min(total, Math.ceil((body.scrollTop + body.clientHeight) / rowHeight) + OVERSCAN);
    const out = [];
    for (let i = first; i < last; i += 1) {
      const row = rows[i];
      out.push(
        h(
          "div",
          { class: "vt-row", role: "row", "aria-rowindex": String(i + 2), style: `transform:translateY(${i * rowHeight}px)`, dataset: rowData?.(row, i) },
          cols.map((c) => h("div", { role: "cell", class: c.num ? "num" : "", ...(c.data?.(row, i) ?? {}) }, c.cell(row, i))),
        ),
      );
    }
    spacer.replaceChildren(...out);
    foot.textContent = footText(total, Math.floor(body.scrollTop / rowHeight), Math.floor(body.clientHeight / rowHeight));
    foot.dataset.rows = String(total);
  });

  body.addEventListener("scroll", render, { passive: true });
  new ResizeObserver(render).observe(body);
  layout();
  return {
    el,
    setRows(next) {
      rows = next;
      render();
    },
    setColumns(next) {
      cols = next;
      layout();
      render();
    },
  };
}
