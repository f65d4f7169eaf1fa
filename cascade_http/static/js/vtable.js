// A virtualised table: however many rows, only those in view (plus a margin) are in the DOM,
// so a 10,000-kernel run scrolls smoothly. ARIA table roles keep it a table to assistive
// technology (aria-rowcount / aria-rowindex say where the rendered rows are).

import { h, perFrame } from "./dom.js";

const OVERSCAN = 8;

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
  const el = h("div", { class: "vt-wrap" }, table);

  function layout() {
    table.style.setProperty("--vt-cols", cols.map((c) => c.width ?? "minmax(6rem, 1fr)").join(" "));
    table.style.setProperty("--vt-row", `${rowHeight}px`);
    head.replaceChildren(...cols.map((c) => h("div", { role: "columnheader", class: c.num ? "num" : "" }, c.title)));
  }

  const render = perFrame(() => {
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
