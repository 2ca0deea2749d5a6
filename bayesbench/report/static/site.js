// bayesbench site: sortable leaderboard tables and a row filter. No library, no network.
//
// A header cell with data-sort ("num" or "text") sorts its table's body rows by that column
// when its button is pressed: numbers by the cell's data-value (rows without one go last,
// whichever the direction), text by the cell's text. Pressing again reverses the order; the
// header says which order holds with aria-sort. Floor rows live in the table's footer and stay
// where they are.
"use strict";

function cellKey(row, index, numeric) {
  const cell = row.cells[index];
  if (!cell) return numeric ? NaN : "";
  const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
  return numeric ? parseFloat(raw) : raw.toLowerCase();
}

function sortTable(table, th) {
  const index = Array.prototype.indexOf.call(th.parentNode.cells, th);
  const numeric = th.dataset.sort === "num";
  const ascending = th.getAttribute("aria-sort") !== "ascending";
  table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    const x = cellKey(a, index, numeric), y = cellKey(b, index, numeric);
    if (numeric) {
      const xMissing = isNaN(x), yMissing = isNaN(y);
      if (xMissing || yMissing) return xMissing - yMissing;
      return ascending ? x - y : y - x;
    }
    return ascending ? x.localeCompare(y) : y.localeCompare(x);
  });
  rows.forEach(function (r) { body.appendChild(r); });
}

function filterRows(text) {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0, total = 0;
  document.querySelectorAll("table.board tbody tr").forEach(function (row) {
    const haystack = row.textContent.toLowerCase();
    const keep = words.every(function (w) { return haystack.indexOf(w) >= 0; });
    row.hidden = !keep;
    total += 1;
    shown += keep ? 1 : 0;
  });
  const count = document.getElementById("filter-count");
  if (count) count.textContent = words.length ? shown + " of " + total + " rows shown" : "";
}

document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("table.board thead th[data-sort]").forEach(function (th) {
    const button = th.querySelector("button");
    const table = th.closest("table");
    if (button) button.addEventListener("click", function () { sortTable(table, th); });
  });
  const filter = document.getElementById("filter");
  if (filter) filter.addEventListener("input", function () { filterRows(filter.value); });
});
