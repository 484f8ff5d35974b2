// The search page: pick or drop an image (or click a result, or type words when the model has a text
// tower), search, show the hits as a grid.
// Each search is a URL (/?item=17, /?q=upload, with k, index, the filter and the page's offset), so
// Back and Forward step through the searches and an item search can be shared. No framework, no build
// step, no network access beyond this server.
"use strict";

const DEFAULT_K = 10; // the API's default k (serving/routes/schemas.py DEFAULT_K)
const DEEPEST = 10; // offset + k may reach 10 x k_max (serving/routes/schemas.py RERANK_FACTOR)
const SUGGESTIONS = 20; // labels suggested in the filter box
const FILE_REJECTED = new Set([400, 413, 415]); // the server could not use the uploaded file
const $ = (id) => document.getElementById(id);
// query: { kind: "file", file, upload }, { kind: "item", id, label, imageUrl } or { kind: "text", text }
// uploads: upload number -> File, so Back and Forward can search an uploaded image again
// offset: the page of results shown (paging); kMax: the server's largest k (GET /readyz)
const state = {
  query: null, previewUrl: null, requestId: 0, uploads: new Map(), offset: 0,
  kMax: Number($("k").max) || 100, labelsRequest: 0, suggestTimer: 0, ready: Promise.resolve(),
};

function chosenIndex() {
  return document.querySelector('input[name="index"]:checked').value;
}

function describe(query) {
  if (query.kind === "text") return `the words "${query.text}"`;
  if (query.kind === "examples") {
    return `${query.positive.length} liked and ${query.negative.length} disliked items (they are not shown)`;
  }
  return query.kind === "file" ? `"${query.file.name}"` : `item #${query.id} (${query.label})`;
}

// A label wraps only after its separators (space _ - . /), never inside a word: <wbr> marks them.
function labelPieces(text) {
  const pieces = [];
  for (const part of text.match(/[^ _\-./]*[ _\-./]|[^ _\-./]+/g) || []) {
    pieces.push(document.createTextNode(part));
    if (/[_\-./]$/.test(part)) pieces.push(document.createElement("wbr"));
  }
  return pieces;
}

// Where the item is: the name it was uploaded with, else its stored file's name.
function fileName(hit) {
  const uploaded = hit.metadata && typeof hit.metadata.filename === "string" ? hit.metadata.filename : "";
  return uploaded || hit.path.split(/[\\/]/).pop();
}

function ms(value) {
  if (value >= 10) return value.toFixed(0);
  if (value >= 0.1) return value.toFixed(1);
  return value > 0 ? value.toPrecision(2) : "0";
}

// An item query embeds nothing: only its search is timed.
function timingText(t, query) {
  const phases = query.kind === "file" ? [["decode", t.decode_ms], ["embed", t.embed_ms]] : [];
  if (query.kind === "text") phases.push(["embed", t.embed_ms]); // the text tower's call
  phases.push(["search", t.search_ms], ["total", t.total_ms]);
  return phases.map(([name, value]) => `${name} ${ms(value)} ms`).join(" · ");
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

function showPreview(src, name, imageUrl) {
  $("preview").src = src;
  $("preview").alt = `query: ${name}`;
  $("preview").hidden = false;
  $("drop-hint").hidden = true;
  $("query-name").replaceChildren(...labelPieces(name)); // the label in it wraps between its words
  $("query-link").hidden = !imageUrl;
  if (imageUrl) $("query-link").href = imageUrl;
}

function clearPreview() {
  if (state.previewUrl) URL.revokeObjectURL(state.previewUrl);
  state.previewUrl = null;
  $("preview").removeAttribute("src");
  $("preview").hidden = true;
  $("drop-hint").hidden = false;
  $("query-name").textContent = "";
  $("query-link").hidden = true;
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

function percentText(probability) {
  if (probability < 0.005) return "<1 %";
  return probability > 0.995 ? ">99 %" : `${Math.round(probability * 100)} %`;
}

// The cut-off slider: shown once a response carries probabilities (a model with a calibration).
function minProbability() {
  return Number($("min-probability").value) / 100;
}

function showCutoff(body) {
  const calibrated = body.results.some((hit) => hit.probability !== null && hit.probability !== undefined);
  $("cutoff").hidden = !calibrated && minProbability() === 0;
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
  if (hit.probability !== null && hit.probability !== undefined) { // the model's calibration (docs/serving.md)
    const chance = span("probability", `same class: ${percentText(hit.probability)}`);
    chance.title = "calibrated probability that this hit shares the query's class";
    top.append(chance);
  }
  const label = span("label", "");
  label.append(...labelPieces(hit.label));
  button.append(img, top, label);
  if (hit.key) { // the user's own id, when the item was added with one
    const key = span("item-key", hit.key);
    key.title = "the item's key: GET /items/by-key/" + encodeURI(hit.key);
    button.append(key);
  }
  button.addEventListener("click", () => {
    state.offset = 0; // a new query starts at its first page
    searchByItem(hit, { history: "push", focus: true });
  });
  const feedback = document.createElement("div"); // the page learns: the next search uses these as examples
  feedback.className = "feedback";
  for (const [text, liked] of [["More like this", true], ["Less like this", false]]) {
    const vote = document.createElement("button");
    vote.type = "button";
    vote.className = liked ? "more-like" : "less-like";
    vote.textContent = text;
    vote.title = `${text}: search again with item #${hit.id} as a ${liked ? "positive" : "negative"} example`;
    vote.addEventListener("click", () => learn(hit.id, liked));
    feedback.append(vote);
  }
  const open = document.createElement("a");
  open.className = "open";
  open.href = hit.image_url;
  open.target = "_blank";
  open.rel = "noopener";
  open.title = `the full image: ${hit.path}`;
  open.textContent = fileName(hit);
  item.append(button, feedback, open);
  const metadata = metadataList(hit.metadata);
  if (metadata) item.append(metadata);
  return item;
}

function showResults(body, query) {
  const grid = $("results");
  grid.replaceChildren(...body.results.map((hit) => hitElement(hit, body.score_kind)));
  grid.dataset.index = body.index;
  showCutoff(body);
  grid.dataset.postprocess = body.postprocess;
  grid.dataset.query = query.kind === "examples" ? `examples:${query.positive}|${query.negative}`
    : query.kind === "item" ? `item:${query.id}` : query.kind === "text" ? `text:${query.text}` : "file";
  $("results-hint").hidden = !body.results.length;
  explainFilter(body);
  const t = body.timings;
  $("timings").textContent =
    `${body.results.length} results like ${describe(query)} from the ${body.index} index` +
    `${body.postprocess === "qe" ? " with query expansion" : ""} · ` +
    timingText(t, query);
  showPager(body);
}

// Up to `limit` labels starting with `prefix` (any case), most items first; null when unknown.
async function labelsStartingWith(prefix, limit) {
  try {
    const response = await fetch(`/labels?${new URLSearchParams({ prefix, limit: String(limit) })}`);
    return response.ok ? (await response.json()).values : null;
  } catch (_) {
    return null; // suggestions and hints are a convenience: the page works without them
  }
}

// What the filter did: the API's warnings (a metadata key no item has), and for no results under a
// label that no item carries, the labels that start with what was typed (the label filter is exact).
async function explainFilter(body) {
  const notes = [...(body.warnings || [])];
  const label = $("filter-label").value.trim();
  const asked = state.requestId;
  if (!body.results.length && label && body.offset === 0) {
    const found = await labelsStartingWith(label, 1000);
    const values = found ? found.map((entry) => String(entry.value)) : [label];
    if (!values.includes(label)) {
      const like = values.length ? ` Labels starting with it: ${values.slice(0, 5).join(", ")}.` : "";
      notes.push(`No item has the label "${label}" (the label must match exactly).${like}`);
    }
  }
  if (asked !== state.requestId) return; // a newer search shows its own
  $("filter-note").textContent = notes.join(" ");
  $("filter-note").hidden = !notes.length;
}

// Previous / Next page: shown once there may be more than one page; Next stops at a short page and
// at the deepest offset the API takes.
function showPager(body) {
  const shown = body.results.length;
  $("pager").hidden = body.offset === 0 && shown < body.k;
  $("prev-page").disabled = body.offset === 0;
  $("next-page").disabled = shown < body.k || body.offset + 2 * body.k > DEEPEST * state.kMax;
  $("page-info").textContent = shown ? `results ${body.offset + 1}–${body.offset + shown}` : "no more results";
}

function turnPage(step) {
  state.offset = Math.max(0, state.offset + step * Number(chosenK()));
  search({ history: "push", focus: true });
}

// After an error nothing stale stays on screen: no old results, no old timings line, and no
// preview of a file the server (or the browser) could not read.
function showFailure(query, message, status) {
  showError(`Could not search with ${describe(query)}: ${message}`);
  $("results").replaceChildren();
  $("results-hint").hidden = true;
  $("filter-note").hidden = true;
  $("pager").hidden = true;
  $("timings").textContent = "";
  if (query.kind === "file" && FILE_REJECTED.has(status)) {
    state.query = null;
    clearPreview();
  }
}

// k as sent: never above the server's k_max (which the API would refuse with a 422).
function chosenK() {
  const raw = $("k").value || String(DEFAULT_K);
  return Number(raw) > state.kMax ? String(state.kMax) : raw;
}

// A k above k_max typed into the field is capped there, with a note saying so, instead of a 422.
// (The note stays while k is at the cap: a second change event of the capped value keeps it.)
function capK() {
  const k = Number($("k").value);
  if (k > state.kMax) {
    $("k").value = String(state.kMax);
    $("k-note").textContent = `At most ${state.kMax} results at a time: Next page shows more.`;
    $("k-note").hidden = false;
  } else if (k < state.kMax) {
    $("k-note").hidden = true;
  }
}

function request(query, filter) {
  const params = new URLSearchParams({ k: chosenK(), index: chosenIndex() });
  if (filter) params.set("filter", filter);
  if (state.offset) params.set("offset", String(state.offset)); // paging (docs/serving.md)
  if ($("qe").checked) params.set("postprocess", "qe"); // alpha-query expansion (docs/serving.md)
  else if (minProbability() > 0) params.set("min_probability", String(minProbability()));
  if ($("collapse").checked) params.set("collapse_duplicates", "true"); // one hit per group of copies
  if (query.kind === "item") return fetch(`/items/${query.id}/similar?${params}`);
  if (query.kind === "examples") { // POST /search by examples (ids as form fields)
    const examples = new FormData();
    for (const id of query.positive) examples.append("positive", String(id));
    for (const id of query.negative) examples.append("negative", String(id));
    return fetch(`/search?${params}`, { method: "POST", body: examples });
  }
  const form = new FormData();
  if (query.kind === "text") form.append("text", query.text); // POST /search by words
  else form.append("image", query.file, query.file.name);
  return fetch(`/search?${params}`, { method: "POST", body: form });
}

// options.history: "push" (a new query), "replace" (the same query, other options) or "none"
// (Back, Forward, a page opened on a URL); options.focus moves the focus to the results' summary.
async function search(options = {}) {
  const query = state.query;
  if (!query) return;
  let filter;
  try {
    filter = filterJson();
  } catch (error) {
    showError(error.message);
    return;
  }
  if (options.history !== "none") remember(query, options.history === "push" ? "push" : "replace");
  const requestId = ++state.requestId;
  setBusy(true);
  try {
    await state.ready; // k_max known: a k from the URL is capped before it is sent
    if (requestId !== state.requestId) return;
    const response = await request(query, filter);
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
    if (options.focus) $("timings").focus(); // keyboard users go on from the results, not the page top
  } catch (error) {
    if (requestId === state.requestId) showFailure(query, `the server could not be reached (${error.message})`, 0);
  } finally {
    if (requestId === state.requestId) setBusy(false);
  }
}

function choose(file) {
  if (!file) return;
  clearPreview();
  const upload = state.uploads.size + 1;
  state.uploads.set(upload, file);
  state.query = { kind: "file", file, upload };
  state.offset = 0;
  state.previewUrl = URL.createObjectURL(file);
  showPreview(state.previewUrl, file.name);
  search({ history: "push" }); // the focus stays on the file input, which is still there
}

// Words typed in the text box (shown when GET /readyz says the model has a text tower).
function searchByText(text, options) {
  clearPreview();
  state.query = { kind: "text", text };
  $("text-query").value = text;
  $("query-name").textContent = `“${text}”`;
  search(options);
}

// "More like this" / "Less like this": the current query's examples plus this hit (a stored item's query is
// its first positive; an image or words, whose vector is not stored, start from the first hit shown).
function learn(id, liked) {
  const query = state.query;
  let positive = [];
  let negative = [];
  if (query && query.kind === "examples") [positive, negative] = [[...query.positive], [...query.negative]];
  else if (query && query.kind === "item") positive = [query.id];
  else if (!liked) {
    const first = document.querySelector("#results .hit");
    if (first && Number(first.dataset.id) !== id) positive = [Number(first.dataset.id)];
  }
  (liked ? positive : negative).push(id);
  if (!positive.length) {
    showError("Less like this needs something to be more like: choose More like this on another hit first.");
    return;
  }
  searchByExamples(positive, negative, { history: "push", focus: true });
}

function searchByExamples(positive, negative, options) {
  clearPreview();
  state.offset = 0;
  state.query = { kind: "examples", positive, negative };
  $("query-name").textContent = `more like #${positive.join(", #")}` +
    (negative.length ? `, less like #${negative.join(", #")}` : "");
  search(options);
}

function searchByItem(hit, options) {
  clearPreview();
  state.query = { kind: "item", id: hit.id, label: hit.label, imageUrl: hit.image_url };
  showPreview(hit.thumbnail_url, `item #${hit.id} · ${hit.label}`, hit.image_url);
  search(options);
}

async function showStatus() {
  try {
    const response = await fetch("/readyz");
    const body = await response.json();
    $("status").textContent = response.ok
      ? `${body.count} images indexed · ${body.embedding_dim}-d model ${body.model_sha256.slice(0, 12)}`
      : body.detail;
    if (!response.ok) return;
    $("bits").textContent = `${body.embedding_dim}-bit`; // one sign bit per dimension
    state.kMax = body.k_max;
    $("text-form").hidden = !body.has_text; // a text box only where the model can embed words
    $("k").max = String(body.k_max);
    capK(); // a k from the URL, read before the server's k_max was known
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

// The filter box: "label" is the exact label, "metadata" comma-separated key=value pairs whose values
// are JSON numbers, true, false or null where they read as one, else text ("12" in quotes is text).
function filterJson() {
  const where = {};
  const label = $("filter-label").value.trim();
  if (label) where.label = label;
  for (const part of $("filter-meta").value.split(",")) {
    if (!part.trim()) continue;
    const at = part.indexOf("=");
    if (at < 1) throw new Error(`Filter: "${part.trim()}" is not key=value (e.g. shop=berlin).`);
    const raw = part.slice(at + 1).trim();
    const json = /^(true|false|null|-?\d+(\.\d+)?([eE][-+]?\d+)?)$/.test(raw);
    where[part.slice(0, at).trim()] = json ? JSON.parse(raw) : raw.replace(/^"(.*)"$/, "$1");
  }
  return Object.keys(where).length ? JSON.stringify(where) : null;
}

// ---- each search is a URL -------------------------------------------------------------------
function pageUrl(query) {
  const params = new URLSearchParams();
  if (query.kind === "item") params.set("item", query.id);
  else if (query.kind === "examples") {
    params.set("positive", query.positive.join(","));
    if (query.negative.length) params.set("negative", query.negative.join(","));
  } else if (query.kind === "text") params.set("text", query.text);
  else params.set("q", "upload");
  if ($("k").value && $("k").value !== String(DEFAULT_K)) params.set("k", $("k").value);
  if (chosenIndex() !== "float") params.set("index", chosenIndex());
  for (const [name, id] of [["label", "filter-label"], ["meta", "filter-meta"]]) {
    if ($(id).value.trim()) params.set(name, $(id).value.trim());
  }
  if ($("qe").checked) params.set("postprocess", "qe");
  if (state.offset) params.set("offset", String(state.offset));
  return `/?${params}`;
}

function remember(query, how) {
  const entry = query.kind === "examples"
    ? { kind: "examples", positive: query.positive, negative: query.negative }
    : query.kind === "item"
    ? { kind: "item", id: query.id, label: query.label, imageUrl: query.imageUrl }
    : query.kind === "text" ? { kind: "text", text: query.text } : { kind: "file", upload: query.upload };
  if (`${location.pathname}${location.search}` === pageUrl(query) && how === "push") how = "replace";
  if (how === "push") history.pushState(entry, "", pageUrl(query));
  else history.replaceState(entry, "", pageUrl(query));
}

function restoreOptions(params) {
  $("k").value = params.get("k") || String(DEFAULT_K);
  const index = params.get("index") === "binary" ? "binary" : "float";
  document.querySelector(`input[name="index"][value="${index}"]`).checked = true;
  $("filter-label").value = params.get("label") || "";
  $("filter-meta").value = params.get("meta") || "";
  $("qe").checked = params.get("postprocess") === "qe";
  state.offset = Math.max(0, Number.parseInt(params.get("offset") || "0", 10) || 0);
  capK();
}

// The search a URL names: an item (looked up for its label and thumbnail), or an upload that
// this page still holds; an upload from before a reload cannot be searched again.
async function restore(entry, params, focus) {
  // A navigation replaces whatever was in flight: the search of an earlier one, or its item look-up
  // (Back right after a reload must not be overtaken by the reload's own, slower, restore).
  const navigation = ++state.requestId;
  restoreOptions(params);
  const item = Number(params.get("item"));
  if (Number.isInteger(item) && item > 0) {
    if (entry && entry.kind === "item" && entry.id === item) {
      searchByItem({ id: item, label: entry.label, thumbnail_url: `/items/${item}/thumbnail`, image_url: entry.imageUrl },
        { history: "none", focus });
      return;
    }
    const response = await fetch(`/items/${item}`);
    if (navigation !== state.requestId) return;
    if (!response.ok) {
      const message = await problemMessage(response);
      if (navigation === state.requestId) showError(`Could not open item #${item}: ${message}`);
      return;
    }
    const hit = await response.json();
    if (navigation !== state.requestId) return;
    searchByItem(hit, { history: "none", focus });
    return;
  }
  const ids = (name) => (params.get(name) || "").split(",").map(Number).filter((n) => Number.isInteger(n) && n > 0);
  if (ids("positive").length) { // the state of a page that learns is its URL: ?positive=1,2&negative=3
    searchByExamples(ids("positive"), ids("negative"), { history: "none", focus });
    return;
  }
  const text = params.get("text");
  if (text && text.trim()) {
    searchByText(text, { history: "none", focus });
    return;
  }
  const file = entry && entry.kind === "file" ? state.uploads.get(entry.upload) : undefined;
  if (params.get("q") === "upload" && file) {
    clearPreview();
    state.query = { kind: "file", file, upload: entry.upload };
    state.previewUrl = URL.createObjectURL(file);
    showPreview(state.previewUrl, file.name);
    search({ history: "none", focus });
    return;
  }
  state.query = null;
  setBusy(false); // a search this navigation replaced no longer ends the busy state
  clearPreview();
  $("results").replaceChildren();
  $("results-hint").hidden = true;
  $("filter-note").hidden = true;
  $("pager").hidden = true;
  $("timings").textContent = "";
  showError(params.get("q") === "upload" ? "The uploaded image is not kept after the page reloads: choose it again." : "");
}

// The label box suggests the labels that start with what is typed (any case; GET /labels, most items
// first) in its datalist; picking one searches at once.
function suggestLabels() {
  clearTimeout(state.suggestTimer);
  state.suggestTimer = setTimeout(async () => {
    const asked = ++state.labelsRequest;
    const values = await labelsStartingWith($("filter-label").value.trim(), SUGGESTIONS);
    if (!values || asked !== state.labelsRequest) return; // a later keystroke asked again
    $("label-suggestions").replaceChildren(...values.map(({ value, count }) => {
      const option = document.createElement("option");
      option.value = String(value);
      option.label = `${count} item${count === 1 ? "" : "s"}`;
      return option;
    }));
  }, 120);
}

// Another option: the same query from its first page.
function searchAgain() {
  state.offset = 0;
  search();
}

wireDropZone();
$("text-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("text-query").value.trim();
  if (!text) return;
  state.offset = 0; // a new query starts at its first page
  searchByText(text, { history: "push", focus: true });
});
document.querySelectorAll('input[name="index"]').forEach((radio) => radio.addEventListener("change", searchAgain));
$("k").addEventListener("change", () => { capK(); searchAgain(); });
["filter-label", "filter-meta"].forEach((id) => {
  $(id).addEventListener("change", searchAgain); // leaving the box
  $(id).addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); searchAgain(); } // or Enter in it
  });
});
$("filter-label").addEventListener("focus", suggestLabels);
$("filter-label").addEventListener("input", (event) => {
  if (event.inputType === "insertReplacementText") searchAgain(); // a suggestion was picked
  else suggestLabels();
});
$("prev-page").addEventListener("click", () => turnPage(-1));
$("next-page").addEventListener("click", () => turnPage(1));
$("options").addEventListener("submit", (event) => event.preventDefault());
window.addEventListener("popstate", (event) => restore(event.state, new URLSearchParams(location.search), true));
$("qe").addEventListener("change", searchAgain);
$("min-probability").addEventListener("input", () => {
  $("min-probability-value").textContent = minProbability() ? `${Math.round(minProbability() * 100)} %` : "any";
});
$("min-probability").addEventListener("change", searchAgain);
$("collapse").addEventListener("change", searchAgain);
state.ready = showStatus();
restore(history.state, new URLSearchParams(location.search), false);
