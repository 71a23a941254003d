// Renders the gateway's own OpenAPI document: every operation with its
// parameters, request body and responses. Text from the document is put in
// the page as text, never as HTML.

const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
};

const resolve = (spec, node) => {
  let seen = 0;
  while (node && node.$ref && node.$ref.startsWith("#/") && seen++ < 16) {
    node = node.$ref.slice(2).split("/").reduce((o, k) => (o ? o[k] : undefined), spec);
  }
  return node || {};
};

const schemaName = (s) => (s && s.$ref ? s.$ref.split("/").pop() : "");

function schemaBlock(spec, schema) {
  if (!schema) return "";
  const name = schemaName(schema);
  const body = JSON.stringify(resolve(spec, schema), null, 2);
  const d = el("details", {}, el("summary", {}, name ? `schema ${name}` : "schema"));
  d.append(el("pre", {}, body.length > 20000 ? body.slice(0, 20000) + "\n…" : body));
  return d;
}

function operation(spec, path, method, op) {
  const id = op.operationId || `${method}-${path}`;
  const box = el("section", { class: "op", id, "aria-labelledby": id + "-h" });
  box.append(el("h2", { id: id + "-h" }, el("span", { class: `method ${method}` }, method), " ", el("code", {}, path)));
  if (op.summary) box.append(el("p", {}, el("strong", {}, op.summary)));
  if (op.description) box.append(el("p", {}, op.description));
  const params = (op.parameters || []).map((p) => resolve(spec, p));
  if (params.length) {
    const t = el("table", {}, el("tr", {}, el("th", {}, "parameter"), el("th", {}, "in"), el("th", {}, "description")));
    for (const p of params) t.append(el("tr", {}, el("td", {}, el("code", {}, p.name || "")), el("td", {}, p.in || ""), el("td", {}, p.description || "")));
    box.append(t);
  }
  const rb = op.requestBody && resolve(spec, op.requestBody);
  if (rb && rb.content) {
    for (const [type, media] of Object.entries(rb.content)) {
      box.append(el("h3", {}, `Request body (${type})`), schemaBlock(spec, media.schema));
    }
  }
  const rt = el("table", {}, el("tr", {}, el("th", {}, "status"), el("th", {}, "description")));
  for (const [code, r0] of Object.entries(op.responses || {})) {
    const r = resolve(spec, r0);
    const cell = el("td", {}, r.description || "");
    for (const [type, media] of Object.entries(r.content || {})) {
      if (media.schema) cell.append(el("div", {}, el("code", {}, type), " ", schemaBlock(spec, media.schema)));
    }
    rt.append(el("tr", {}, el("td", {}, el("code", {}, code)), cell));
  }
  box.append(el("h3", {}, "Responses"), rt);
  return box;
}

async function main() {
  const status = document.getElementById("status");
  try {
    const res = await fetch("/openapi.json");
    if (!res.ok) throw new Error(`GET /openapi.json: ${res.status}`);
    const spec = await res.json();
    document.getElementById("title").textContent = `${spec.info.title} ${spec.info.version}`;
    const toc = el("ul");
    const ops = document.getElementById("ops");
    let n = 0;
    for (const [path, item] of Object.entries(spec.paths || {})) {
      for (const method of ["get", "head", "post", "put", "patch", "delete"]) {
        if (!item[method]) continue;
        const box = operation(spec, path, method, item[method]);
        ops.append(box);
        toc.append(el("li", {}, el("a", { href: "#" + box.id }, `${method.toUpperCase()} ${path}`)));
        n++;
      }
    }
    document.getElementById("toc").append(toc);
    status.textContent = `${n} operations.`;
  } catch (err) {
    status.textContent = `Could not load the API description: ${err.message}`;
  }
}

main();
