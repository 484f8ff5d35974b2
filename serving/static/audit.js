// "Probably mislabelled": the items of the index whose neighbours and class means point to another label
// (GET /audit, most suspect first, page by page), each beside its nearest neighbours (GET /items/{id}/similar).
// The view is a URL like a search: /?view=audit&audit_offset=20. Opening it or turning its page pushes that
// URL and replays it as Back and Forward do (a popstate), so app.js clears the search and this file shows the
// page the URL names. Every tile links to that item's search.
"use strict";

const AUDIT_PAGE = 10; // suspects per page
const AUDIT_NEIGHBOURS = 5; // nearest neighbours beside each
const audit = { request: 0 };

function auditParams() {
  const params = new URLSearchParams(location.search);
  if (params.get("view") !== "audit") return null;
  return { offset: Math.max(0, Number.parseInt(params.get("audit_offset") || "0", 10) || 0) };
}

function auditUrl(offset) {
  const params = new URLSearchParams({ view: "audit" });
  if (offset) params.set("audit_offset", String(offset));
  return `/?${params}`;
}

// A navigation of this page: the new URL, then what Back and Forward do with one.
function openAudit(offset) {
  history.pushState(null, "", auditUrl(offset));
  window.dispatchEvent(new PopStateEvent("popstate", { state: null }));
}

function auditTile(item, tag, className, caption, title) {
  const li = document.createElement(tag);
  li.className = className;
  li.dataset.id = item.id;
  const link = document.createElement("a");
  link.href = `/?item=${item.id}`;
  link.title = title;
  const img = document.createElement("img");
  img.src = `/items/${item.id}/thumbnail`;
  img.alt = title;
  img.loading = "lazy";
  const text = document.createElement("span");
  text.className = "label";
  text.textContent = caption;
  link.append(img, text);
  li.append(link);
  return li;
}

function suspectElement(row, rank, suspects) {
  const suspect = rank < suspects; // its score reaches the suspect score
  const li = document.createElement("li");
  li.className = suspect ? "suspect" : "suspect below";
  li.dataset.id = row.id;
  const verdict = document.createElement("p");
  verdict.className = "verdict";
  const suggested = !row.suggested_label ? "no other class suggested"
    : suspect ? `probably ${row.suggested_label}` : `likely right (else ${row.suggested_label})`;
  verdict.append(
    Object.assign(document.createElement("span"), { className: "given", textContent: row.label }),
    suspect ? " → " : " · ",
    Object.assign(document.createElement(suspect ? "strong" : "span"), { className: "suggested", textContent: suggested }),
    Object.assign(document.createElement("span"), { className: "score", textContent: ` · score ${row.score.toFixed(3)}` }),
  );
  const item = auditTile(row, "div", "audit-item", `#${row.id} · ${row.label}`,
    `item #${row.id}, labelled ${row.label}: search images like it`);
  const neighbours = document.createElement("ol");
  neighbours.className = "grid neighbours";
  neighbours.setAttribute("aria-label", `nearest neighbours of item #${row.id}`);
  li.append(verdict, item, neighbours);
  showNeighbours(row, neighbours);
  return li;
}

async function showNeighbours(row, list) {
  const asked = audit.request;
  const response = await fetch(`/items/${row.id}/similar?${new URLSearchParams({ k: String(AUDIT_NEIGHBOURS) })}`);
  if (asked !== audit.request) return;
  if (!response.ok) {
    list.replaceChildren(Object.assign(document.createElement("li"), { textContent: `no neighbours (${response.status})` }));
    return;
  }
  const body = await response.json();
  if (asked !== audit.request) return;
  list.replaceChildren(...body.results.map((hit) => {
    const kind = hit.label === row.label ? "given" : hit.label === row.suggested_label ? "suggested" : "other";
    return auditTile(hit, "li", `neighbour ${kind}`, `${hit.score.toFixed(3)} · ${hit.label}`,
      `item #${hit.id}, labelled ${hit.label} (similarity ${hit.score.toFixed(3)}): search images like it`);
  }));
  list.dataset.loaded = "true";
}

async function showAudit(focus) {
  const wanted = auditParams();
  const view = document.getElementById("audit-view");
  const asked = ++audit.request;
  view.hidden = !wanted;
  document.getElementById("show-audit").hidden = Boolean(wanted);
  if (!wanted) return;
  const note = document.getElementById("audit-note");
  const list = document.getElementById("audit-rows");
  view.setAttribute("aria-busy", "true");
  note.textContent = "Scoring the labels…";
  list.replaceChildren();
  if (focus) document.getElementById("audit-title").focus();
  const response = await fetch(`/audit?${new URLSearchParams({ offset: String(wanted.offset), limit: String(AUDIT_PAGE) })}`);
  if (asked !== audit.request) return;
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    note.textContent = `Could not audit the labels: ${body.detail || `${response.status} ${response.statusText}`}`;
    view.setAttribute("aria-busy", "false");
    return;
  }
  const body = await response.json();
  if (asked !== audit.request) return;
  const shown = body.rows.length;
  note.textContent = `${body.suspects} of ${body.total} items are probably mislabelled: their nearest neighbours ` +
    `and the class means point to another label. ` +
    (shown ? `Items ${body.offset + 1}–${body.offset + shown}, most suspect first.` : "No more items.");
  list.replaceChildren(...body.rows.map((row, i) => suspectElement(row, body.offset + i, body.suspects)));
  document.getElementById("audit-prev").disabled = body.offset === 0;
  document.getElementById("audit-next").disabled = body.offset + shown >= body.total;
  list.dataset.offset = String(body.offset);
  view.setAttribute("aria-busy", "false");
}

document.getElementById("show-audit").addEventListener("click", () => openAudit(0));
document.getElementById("audit-prev").addEventListener("click", () => {
  openAudit(Math.max(0, (auditParams()?.offset || 0) - AUDIT_PAGE));
});
document.getElementById("audit-next").addEventListener("click", () => openAudit((auditParams()?.offset || 0) + AUDIT_PAGE));
window.addEventListener("popstate", () => showAudit(true));
// A search (app.js pushes its URL, which fires no event) closes the view: follow the query's name.
new MutationObserver(() => { if (!auditParams()) showAudit(false); })
  .observe(document.getElementById("query-name"), { childList: true, characterData: true, subtree: true });
showAudit(false);
