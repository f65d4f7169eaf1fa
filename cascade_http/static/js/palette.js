// Colours for canvas drawings: a categorical palette given out in order of first use, and
// the page's theme colours read from its CSS variables.

const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#3b8bc2", "#d4a6c8", "#86bcb6"];

/** Hands out a colour per key, in order of first request; repeats after the palette's end. */
export function colorMap() {
  const colors = new Map();
  return {
    get(key) {
      let c = colors.get(key);
      if (!c) colors.set(key, (c = PALETTE[colors.size % PALETTE.length]));
      return c;
    },
    entries: () => [...colors.entries()],
  };
}

/** Black or white, whichever reads better on `hex`. */
export function textOn(hex) {
  const n = parseInt(hex.slice(1), 16);
  const [r, g, b] = [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  return 0.299 * r + 0.587 * g + 0.114 * b > 150 ? "#111" : "#fff";
}

export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** A canvas sized to its CSS box at the device's pixel ratio; returns its 2D context. */
export function fitCanvas(canvas, width, height) {
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}
