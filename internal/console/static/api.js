// The gateway's API, as the console calls it: same origin, the API key
// of this tab (if any) as Authorization: Bearer, errors as ApiError with
// the gateway's stable code.

const KEY_ITEM = "agentgate.apiKey";

/** ApiError is a failed request: its status and the body's error code, message and field. */
export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = code || "";
    this.field = field || "";
  }
}

// sessionStorage can be unavailable (a browser setting); the key then
// lives as long as the page.
let memoryKey = "";
function readKey() {
  try {
    return sessionStorage.getItem(KEY_ITEM) ?? "";
  } catch {
    return memoryKey;
  }
}
function writeKey(k) {
  memoryKey = k;
  try {
    if (k) sessionStorage.setItem(KEY_ITEM, k);
    else sessionStorage.removeItem(KEY_ITEM);
  } catch {
    // kept in memory only
  }
}

/** Api calls the gateway. onUnauthorized is told of every 401. */
export class Api {
  constructor() {
    this.onUnauthorized = () => {};
  }

  get key() {
    return readKey();
  }

  setKey(k) {
    writeKey(String(k ?? "").trim());
  }

  /** request sends one request and returns the Response, or throws ApiError. */
  async request(method, path, { body, headers } = {}) {
    const h = new Headers(headers ?? {});
    const key = this.key;
    if (key) h.set("Authorization", "Bearer " + key);
    let payload;
    if (body !== undefined) {
      h.set("Content-Type", "application/json");
      payload = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, { method, headers: h, body: payload, cache: "no-store", credentials: "same-origin" });
    } catch (err) {
      throw new ApiError(0, "network", `the gateway cannot be reached (${err.message})`);
    }
    if (!resp.ok) {
      let code = "";
      let message = `${method} ${path}: HTTP ${resp.status}`;
      let field = "";
      try {
        const e = (await resp.json()).error;
        if (e) ({ code = "", message = message, field = "" } = e);
      } catch {
        // not the gateway's error body
      }
      const err = new ApiError(resp.status, code, message, field);
      if (resp.status === 401) this.onUnauthorized(err);
      throw err;
    }
    return resp;
  }

  /** json sends a request and returns its JSON body (null for 204). */
  async json(method, path, opts) {
    const resp = await this.request(method, path, opts);
    return resp.status === 204 ? null : resp.json();
  }

  /** text returns the body of a GET as text, with the response. */
  async text(path) {
    const resp = await this.request("GET", path);
    return { text: await resp.text(), resp };
  }

  /** blob returns the body of a GET as a Blob. */
  async blob(path) {
    const resp = await this.request("GET", path);
    return resp.blob();
  }
}

/** runPath is the path of a run's resource: runPath(id, "diff") is /v1/runs/{id}/diff. */
export function runPath(id, ...rest) {
  return ["/v1/runs", encodeURIComponent(id), ...rest].join("/");
}
