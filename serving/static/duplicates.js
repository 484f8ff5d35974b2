// Copies on the search page: the copies of the item searched (GET /items/{id}/duplicates, shown under its
// results) and the groups of near-duplicates of the whole index (GET /duplicates, page by page). Clicking a
// thumbnail searches that item, as a result does.
"use strict";

const copies = { cursor: null, itemShown: null };

function copyTile(item, score) {
  const li = document.createElement("li");
  const link = document.createElement("a");
  link.href = `/?item=${item.id}`;
  link.title = `${item.label} · item #${item.id}${score === undefined ? "" : ` · ${score.toFixed(3)}`}`;
  const img = document.createElement("img");
  img.src = item.thumbnail_url;
  img.alt = link.title;
  img.loading = "lazy";
  link.append(img);
  const caption = document.createElement("span");
  caption.textContent = score === undefined ? item.label : `${score.toFixed(3)} · ${item.label}`;
  li.append(link, caption);
  return li;
}

async function showItemCopies() {
  const item = new URLSearchParams(location.search).get("item");
  if (item === copies.itemShown) return;
  copies.itemShown = item;
  const section = document.getElementById("item-copies");
  section.hidden = true;
  if (!item) return;
  const response = await fetch(`/items/${encodeURIComponent(item)}/duplicates`);
  if (!response.ok || copies.itemShown !== item) return; // no threshold measured, or another item since
  const body = await response.json();
  document.getElementById("item-copies-list").replaceChildren(
    ...body.duplicates.map((hit) => copyTile(hit, hit.score)));
  section.hidden = body.duplicates.length === 0;
}

async function showGroups(more) {
  const params = new URLSearchParams({ limit: "10" });
  if (document.getElementById("groups-mixed").checked) params.set("mixed_labels", "true");
  if (more && copies.cursor) params.set("cursor", copies.cursor);
  const note = document.getElementById("groups-note");
  note.textContent = "Finding copies…";
  const response = await fetch(`/duplicates?${params}`);
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    note.textContent = body.detail || `${response.status} ${response.statusText}`;
    return;
  }
  const body = await response.json();
  note.textContent = `${body.groups_total} groups hold ${body.duplicated_items} items ` +
    `(copies: cosine similarity ≥ ${body.threshold.toFixed(3)}).`;
  const list = document.getElementById("groups");
  if (!more) list.replaceChildren();
  for (const group of body.groups) {
    const li = document.createElement("li");
    const title = document.createElement("p");
    title.textContent = `group ${group.group}: ${group.size} items`;
    const grid = document.createElement("ol");
    grid.className = "grid";
    grid.append(...group.items.map((item) => copyTile(item)));
    li.append(title, grid);
    list.append(li);
  }
  copies.cursor = body.next_cursor;
  document.getElementById("more-groups").hidden = !body.next_cursor;
}

document.getElementById("show-groups").addEventListener("click", () => showGroups(false));
document.getElementById("groups-mixed").addEventListener("change", () => showGroups(false));
document.getElementById("more-groups").addEventListener("click", () => showGroups(true));
// app.js changes the URL on every search (pushState fires no event): follow the query's name instead.
new MutationObserver(showItemCopies).observe(document.getElementById("query-name"), { childList: true });
showItemCopies();
