// The search page: pick or drop an image (or click a result), search, show the hits as a grid.
// No framework, no build step, no network access beyond this server.
"use strict";

const DEFAULT_K = 10; // the API's default k (serving/schemas.py DEFAULT_K)
const FILE_REJECTED = new Set([400, 413, 415]); // the server could not use the uploaded file
const $ = (id) => document.getElementById(id);
// query: { kind: "file", file } or { kind: "item", id, label }
const state = { query: null, previewUrl: null, requestId: 0 };

function chosenIndex() {
  return document.querySelector('input[name="index"]:checked').value;
}

function describe(query) {
  return query.kind === "file" ? `"${query.file.name}"` : `item #${query.id} (${query.label})`;
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

// Problem bodies (RFC 9457) carry a human sentence in `detail`; fall back to the status text.
async function problemMessage(response) {
  try {
    const body = await response.json();
    return `${body.title || response.statusText} (${response.status}): ${body.detail || ""}`;
  } catch (_) {
    return `${response.status} ${response.statusText}`;
  }
}

function showPreview(src, name) {
  $("preview").src = src;
  $("preview").alt = `query: ${name}`;
  $("preview").hidden = false;
  $("drop-hint").hidden = true;
  $("query-name").textContent = name;
}

function clearPreview() {
  if (state.previewUrl) URL.revokeObjectURL(state.previewUrl);
  state.previewUrl = null;
  $("preview").removeAttribute("src");
  $("preview").hidden = true;
  $("drop-hint").hidden = false;
  $("query-name").textContent = "";
}

function setBusy(busy) {
  $("results-section").setAttribute("aria-busy", String(busy));
  $("loading").hidden = !busy;
  document.body.classList.toggle("busy", busy);
}

function metadataList(metadata) {
  const entries = Object.entries(metadata || {});
  if (!entries.length) return null;
  const list = document.createElement("dl");
  list.className = "meta";
  for (const [key, value] of entries) {
    const term = document.createElement("dt");
    term.textContent = key;
    const text = document.createElement("dd");
    text.textContent = typeof value === "object" ? JSON.stringify(value) : String(value);
    list.append(term, text);
  }
  return list;
}

function span(className, text) {
  const element = document.createElement("span");
  element.className = className;
  element.textContent = text;
  return element;
}

function hitElement(hit, scoreKind) {
  const item = document.createElement("li");
  item.className = "hit";
  item.dataset.id = hit.id;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "hit-button";
  button.title = `Find images like item #${hit.id} (${hit.label})`;
  const img = document.createElement("img");
  img.src = hit.thumbnail_url;
  img.alt = hit.label;
  img.loading = "lazy";
  const score = span("score", hit.score.toFixed(3));
  score.title = scoreKind === "hamming"
    ? "1 - 2 x Hamming distance / bits (higher is closer)"
    : "cosine similarity (higher is closer)";
  const top = span("caption-top", "");
  top.append(span("item-id", `#${hit.id}`), score);
  button.append(img, top, span("label", hit.label));
  button.addEventListener("click", () => searchByItem(hit));
  item.append(button);
  const metadata = metadataList(hit.metadata);
  if (metadata) item.append(metadata);
  return item;
}

function showResults(body, query) {
  const grid = $("results");
  grid.replaceChildren(...body.results.map((hit) => hitElement(hit, body.score_kind)));
  grid.dataset.index = body.index;
  grid.dataset.postprocess = body.postprocess;
  grid.dataset.query = query.kind === "item" ? `item:${query.id}` : "file";
  $("results-hint").hidden = !body.results.length;
  const t = body.timings;
  $("timings").textContent =
    `${body.results.length} results like ${describe(query)} from the ${body.index} index` +
    `${body.postprocess === "qe" ? " with query expansion" : ""} · ` +
    `decode ${t.decode_ms.toFixed(1)} ms · embed ${t.embed_ms.toFixed(1)} ms · ` +
    `search ${t.search_ms.toFixed(1)} ms · total ${t.total_ms.toFixed(1)} ms`;
}

// After an error nothing stale stays on screen: no old results, no old timings line, and no
// preview of a file the server (or the browser) could not read.
function showFailure(query, message, status) {
  showError(`Could not search with ${describe(query)}: ${message}`);
  $("results").replaceChildren();
  $("results-hint").hidden = true;
  $("timings").textContent = "";
  if (query.kind === "file" && FILE_REJECTED.has(status)) {
    state.query = null;
    clearPreview();
  }
}

function request(query) {
  const params = new URLSearchParams({ k: $("k").value || String(DEFAULT_K), index: chosenIndex() });
  if ($("qe").checked) params.set("postprocess", "qe"); // alpha-query expansion (docs/serving.md)
  if (query.kind === "item") return fetch(`/items/${query.id}/similar?${params}`);
  const form = new FormData();
  form.append("image", query.file, query.file.name);
  return fetch(`/search?${params}`, { method: "POST", body: form });
}

async function search() {
  const query = state.query;
  if (!query) return;
  const requestId = ++state.requestId;
  setBusy(true);
  try {
    const response = await request(query);
    if (requestId !== state.requestId) return; // a newer search replaced this one
    if (!response.ok) {
      const message = await problemMessage(response);
      if (requestId === state.requestId) showFailure(query, message, response.status);
      return;
    }
    const body = await response.json();
    if (requestId !== state.requestId) return;
    showError("");
    showResults(body, query);
  } catch (error) {
    if (requestId === state.requestId) showFailure(query, `the server could not be reached (${error.message})`, 0);
  } finally {
    if (requestId === state.requestId) setBusy(false);
  }
}

function choose(file) {
  if (!file) return;
  clearPreview();
  state.query = { kind: "file", file };
  state.previewUrl = URL.createObjectURL(file);
  showPreview(state.previewUrl, file.name);
  search();
}

function searchByItem(hit) {
  clearPreview();
  state.query = { kind: "item", id: hit.id, label: hit.label };
  showPreview(hit.thumbnail_url, `item #${hit.id} · ${hit.label}`);
  search();
}

async function showStatus() {
  try {
    const response = await fetch("/readyz");
    const body = await response.json();
    $("status").textContent = response.ok
      ? `${body.count} images indexed · ${body.embedding_dim}-d model ${body.model_sha256.slice(0, 12)}`
      : body.detail;
    if (response.ok) $("bits").textContent = `${body.embedding_dim}-bit`; // one sign bit per dimension
  } catch (_) {
    $("status").textContent = "the server cannot be reached";
  }
}

function wireDropZone() {
  const drop = $("drop");
  ["dragenter", "dragover"].forEach((name) =>
    drop.addEventListener(name, (event) => { event.preventDefault(); drop.classList.add("over"); }));
  ["dragleave", "drop"].forEach((name) =>
    drop.addEventListener(name, (event) => { event.preventDefault(); drop.classList.remove("over"); }));
  drop.addEventListener("drop", (event) => choose(event.dataTransfer.files[0]));
  $("file").addEventListener("change", (event) => {
    choose(event.target.files[0]);
    event.target.value = ""; // choosing the same file again searches again
  });
  // A file the browser cannot display: show the hint instead of a broken-image icon.
  $("preview").addEventListener("error", () => {
    if ($("preview").getAttribute("src")) {
      $("preview").hidden = true;
      $("drop-hint").hidden = false;
    }
  });
}

wireDropZone();
document.querySelectorAll('input[name="index"]').forEach((radio) => radio.addEventListener("change", search));
$("k").addEventListener("change", search);
$("qe").addEventListener("change", search);
showStatus();
