"""Measuring a drawn page in the browser: labels that overlap, text cut off at a picture's edge.

`label_overlaps` draws every picture the page holds (every step of every column, from the
page's own data, or the explorer's last answer) in a hidden box of the same page, with the
page's fonts, and compares the bounding boxes of every label (`text`), message badge and visible message dot, in
the picture's own units, so scaling to the column's width changes nothing.
"""

from __future__ import annotations

OVERLAPS_JS = r"""
const out = [];
const seen = new Set();
function boxes(svg) {
  const items = [];
  for (const el of svg.querySelectorAll("text, circle.message-badge, circle.message-dot")) {
    if (el.tagName === "text" && !el.textContent.trim()) continue;
    if (el.getAttribute("opacity") === "0") continue;  // a delivered message's dot: not drawn
    const b = el.getBBox();
    if (!b.width || !b.height) continue;
    const number = el.parentNode.querySelector("text.message-number");
    const name = el.tagName === "text" ? el.textContent
      : (el.classList.contains("message-dot") ? "dot of message " : "badge of message ") + number.textContent;
    items.push({ el, name, x: b.x, y: b.y, w: b.width, h: b.height });
  }
  return items;
}
function inside(a, b) {  // a message's number drawn on its own badge, a lost message's mark by its dot
  if (a.el.parentNode !== b.el.parentNode || !a.el.parentNode.classList.contains("message")) return false;
  const kinds = new Set([a.el.getAttribute("class"), b.el.getAttribute("class")]);
  return (kinds.has("message-number") && kinds.has("message-badge")) ||
    (kinds.has("lost-mark") && kinds.has("message-dot"));
}
const data = arguments[0] || JSON.parse(document.getElementById("hwm-data").textContent);
const box = document.createElement("div");
box.style.cssText = "position:absolute; left:-10000px; top:0; visibility:hidden";
document.body.appendChild(box);
data.columns.forEach((col, column) => col.frames.forEach((frame) => {
  box.innerHTML = frame.svg;
  const step = frame.number;
  {
    const svg = box.querySelector("svg");
    const width = svg.viewBox.baseVal.width, height = svg.viewBox.baseVal.height;
    const all = boxes(svg);
    for (const a of all) {
      if (a.x < -0.5 || a.x + a.w > width + 0.5 || a.y < -0.5 || a.y + a.h > height + 0.5) {
        const text = "step " + step + " column " + column + ": '" + a.name + "' is cut off at the picture's edge";
        if (!seen.has(text)) { seen.add(text); out.push(text); }
      }
    }
    for (let i = 0; i < all.length; i++) {
      for (let j = i + 1; j < all.length; j++) {
        const a = all[i], b = all[j];
        if (inside(a, b)) continue;
        // One pixel of slack: glyph boxes include the line's leading.
        const w = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
        const h = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
        if (w > 1 && h > 2) {
          const text = "step " + step + " column " + column + ": '" + a.name + "' overlaps '" + b.name + "'";
          if (!seen.has(text)) { seen.add(text); out.push(text); }
        }
      }
    }
  }
}));
box.remove();
return out;
"""


def label_overlaps(driver, data: dict | None = None) -> list[str]:
    """Every pair of overlapping labels, and every label cut off, in every picture of the open
    trace page (or of `data`, an explorer answer: `{"columns": [{"frames": [{"svg": ...}]}]}`)."""
    return driver.execute_script(OVERLAPS_JS, data)
