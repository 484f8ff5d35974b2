// The search page: pick or drop an image, POST it to /search, show the hits as a grid.
// No framework, no build step, no network access beyond this server.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { file: null, previewUrl: null, requestId: 0 };

function chosenIndex() {
  return document.querySelector('input[name="index"]:checked').value;
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

function setPreview(file) {
  if (state.previewUrl) URL.revokeObjectURL(state.previewUrl);
  state.previewUrl = URL.createObjectURL(file);
  $("preview").src = state.previewUrl;
  $("preview").hidden = false;
  $("drop-hint").hidden = true;
}

function hitElement(hit, scoreKind) {
  const item = document.createElement("li");
  item.className = "hit";
  item.dataset.id = hit.id;
  const img = document.createElement("img");
  img.src = hit.thumbnail_url;
  img.alt = hit.label;
  img.loading = "lazy";
  const caption = document.createElement("div");
  caption.className = "caption";
  const label = document.createElement("span");
  label.className = "label";
  label.textContent = hit.label;
  const score = document.createElement("span");
  score.className = "score";
  score.textContent = hit.score.toFixed(3);
  score.title = scoreKind === "hamming"
    ? "1 - 2 x Hamming distance / bits (higher is closer)"
    : "cosine similarity (higher is closer)";
  caption.append(label, score);
  item.append(img, caption);
  return item;
}

function showResults(body) {
  const grid = $("results");
  grid.replaceChildren(...body.results.map((hit) => hitElement(hit, body.score_kind)));
  grid.dataset.index = body.index;
  const t = body.timings;
  $("timings").textContent =
    `${body.results.length} results from the ${body.index} index · decode ${t.decode_ms.toFixed(1)} ms · ` +
    `embed ${t.embed_ms.toFixed(1)} ms · search ${t.search_ms.toFixed(1)} ms · total ${t.total_ms.toFixed(1)} ms`;
}

async function search() {
  if (!state.file) return;
  const requestId = ++state.requestId;
  const form = new FormData();
  form.append("image", state.file, state.file.name);
  const params = new URLSearchParams({ k: $("k").value || "8", index: chosenIndex() });
  document.body.classList.add("busy");
  try {
    const response = await fetch(`/search?${params}`, { method: "POST", body: form });
    if (requestId !== state.requestId) return; // a newer search replaced this one
    if (!response.ok) {
      showError(await problemMessage(response));
      $("results").replaceChildren();
      return;
    }
    showError("");
    showResults(await response.json());
  } catch (error) {
    if (requestId === state.requestId) showError(`The server could not be reached: ${error.message}`);
  } finally {
    if (requestId === state.requestId) document.body.classList.remove("busy");
  }
}

function choose(file) {
  if (!file) return;
  state.file = file;
  setPreview(file);
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
  $("file").addEventListener("change", (event) => choose(event.target.files[0]));
}

wireDropZone();
document.querySelectorAll('input[name="index"]').forEach((radio) => radio.addEventListener("change", search));
$("k").addEventListener("change", search);
showStatus();
