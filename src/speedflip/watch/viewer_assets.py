"""The replay page: HTML template, style sheet and the hand-written canvas renderer (JavaScript).

Everything the page needs is in these strings; nothing is fetched when it opens. The renderer is a
small perspective projection with a painter's sort over canvas-2D polygons (no WebGL, so it runs the
same on machines without a GPU, in headless browsers and in remote desktops).
"""

from __future__ import annotations

VIEWER_CSS = r"""
html, body { margin: 0; height: 100%; background: #0d1117; color: #e6edf3; overflow: hidden;
  font: 14px/1.3 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
#view { position: absolute; inset: 0; width: 100%; height: 100%; display: block; cursor: grab; }
#view.dragging { cursor: grabbing; }
#hud { position: absolute; top: 10px; left: 50%; transform: translateX(-50%); display: flex; gap: 0;
  align-items: stretch; user-select: none; pointer-events: none; font-weight: 700; }
#hud .team { padding: 6px 14px; min-width: 150px; display: flex; align-items: center; gap: 10px; }
#hud .blue { background: rgba(38, 98, 235, 0.85); justify-content: flex-end; border-radius: 6px 0 0 6px; }
#hud .orange { background: rgba(236, 120, 20, 0.88); border-radius: 0 6px 6px 0; }
#hud .score { font-size: 26px; }
#hud .name { font-size: 13px; max-width: 220px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
#hud .clock { background: rgba(13, 17, 23, 0.85); padding: 6px 14px; font-size: 24px;
  font-variant-numeric: tabular-nums; min-width: 70px; text-align: center; }
#banner { position: absolute; top: 30%; width: 100%; text-align: center; font-size: 64px; font-weight: 800;
  letter-spacing: 4px; pointer-events: none; opacity: 0; transition: opacity 0.3s;
  text-shadow: 0 0 18px rgba(0, 0, 0, 0.8); }
#boosts { position: absolute; top: 70px; right: 12px; width: 210px; user-select: none; pointer-events: none; }
#boosts .car { display: flex; align-items: center; gap: 6px; margin: 3px 0; font-size: 12px; }
#boosts .bar { flex: 1; height: 10px; background: rgba(255, 255, 255, 0.15); border-radius: 5px; overflow: hidden; }
#boosts .fill { height: 100%; width: 0%; }
#boosts .amount { width: 28px; text-align: right; font-variant-numeric: tabular-nums; }
#controls { position: absolute; left: 0; right: 0; bottom: 0; padding: 8px 12px; display: flex; gap: 10px;
  align-items: center; background: rgba(13, 17, 23, 0.88); user-select: none; }
#controls button, #controls select { background: #21262d; color: #e6edf3; border: 1px solid #30363d;
  border-radius: 6px; padding: 4px 10px; font: inherit; cursor: pointer; }
#controls button:hover, #controls select:hover { border-color: #8b949e; }
#scrub { flex: 1; accent-color: #58a6ff; }
#time { font-variant-numeric: tabular-nums; min-width: 110px; text-align: right; }
#help { position: absolute; left: 12px; bottom: 52px; font-size: 12px; color: #8b949e; pointer-events: none;
  max-width: 330px; }
#error { position: absolute; inset: 30% 20% auto 20%; padding: 16px; background: #3d1114; border: 1px solid #f85149;
  border-radius: 8px; display: none; white-space: pre-wrap; }
"""

VIEWER_HTML = r"""<!DOCTYPE html>
<html lang="en" data-replay-status="loading">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>__CSS__</style>
</head>
<body>
<canvas id="view"></canvas>
<div id="hud">
  <div class="team blue"><span class="name" id="blue-name"></span><span class="score" id="blue-score">0</span></div>
  <div class="clock" id="clock">0:00</div>
  <div class="team orange"><span class="score" id="orange-score">0</span>
    <span class="name" id="orange-name"></span></div>
</div>
<div id="banner"></div>
<div id="boosts"></div>
<div id="help">drag: orbit &middot; wheel: zoom &middot; shift+drag: pan &middot; space: play/pause &middot;
 &larr;/&rarr;: 5 s &middot; c: camera</div>
<div id="controls">
  <button id="play" title="play / pause (space)">Play</button>
  <input id="scrub" type="range" min="0" max="1000" step="0.01" value="0" aria-label="time">
  <span id="time">0:00 / 0:00</span>
  <select id="speed" title="playback speed">
    <option value="0.25">0.25x</option><option value="0.5">0.5x</option><option value="1" selected>1x</option>
    <option value="2">2x</option><option value="4">4x</option><option value="8">8x</option>
  </select>
  <select id="camera" title="camera (c)"></select>
  <button id="reset" title="reset the camera">Reset view</button>
</div>
<div id="error"></div>
<script id="replay-meta" type="application/json">__META__</script>
<script id="replay-data" type="application/octet-stream">__DATA__</script>
<script>__JS__</script>
</body>
</html>
"""

VIEWER_JS = r"""
"use strict";
(function () {
  const root = document.documentElement;
  const errors = [];
  function fail(message) {
    errors.push(String(message));
    root.dataset.replayStatus = "error";
    root.dataset.replayErrors = errors.join(" | ");
    const box = document.getElementById("error");
    if (box) { box.style.display = "block"; box.textContent = "Replay viewer error:\n" + errors.join("\n"); }
  }
  window.addEventListener("error", (e) => fail(e.message || "script error"));
  window.addEventListener("unhandledrejection", (e) => fail((e.reason && e.reason.message) || e.reason));

  // ------------------------------------------------------------------ data
  function base64ToBytes(text) {
    const bin = atob(text.trim());
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  async function inflate(bytes, encoding) {
    if (encoding === "raw") return bytes.buffer;
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot decompress the replay (DecompressionStream is missing); " +
        "use a current Chrome, Edge, Firefox or Safari, or rebuild the page with --no-compress");
    }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return await new Response(stream).arrayBuffer();
  }
  const TYPES = { int16: Int16Array, uint8: Uint8Array, float32: Float32Array, int32: Int32Array };
  function decodeChannels(buffer, layout) {
    const out = {};
    for (const ch of layout) {
      const Type = TYPES[ch.dtype];
      const count = ch.shape.reduce((a, b) => a * b, 1);
      const arr = new Type(buffer, ch.offset, count);
      if (ch.delta) {  // undo the time differences (int16, modulo 2^16)
        const stride = count / ch.shape[0];
        for (let i = stride; i < count; i++) arr[i] = (arr[i] + arr[i - stride]) << 16 >> 16;
      }
      out[ch.name] = { data: arr, shape: ch.shape, scale: ch.scale || 1 };
    }
    return out;
  }

  // ------------------------------------------------------------------ math
  const v3 = (x, y, z) => [x, y, z];
  const add = (a, b) => [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
  const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
  const mul = (a, s) => [a[0] * s, a[1] * s, a[2] * s];
  const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
  const len = (a) => Math.sqrt(dot(a, a));
  const norm = (a) => { const l = len(a) || 1; return [a[0] / l, a[1] / l, a[2] / l]; };
  const lerp = (a, b, t) => a + (b - a) * t;
  // quaternion (w, x, y, z) -> columns forward, right, up (RocketSim's convention)
  function quatAxes(w, x, y, z) {
    const n = Math.sqrt(w * w + x * x + y * y + z * z) || 1;
    w /= n; x /= n; y /= n; z /= n;
    return [
      [1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)],
      [2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)],
      [2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)],
    ];
  }

  // ------------------------------------------------------------------ camera
  class Camera {
    constructor() { this.reset("ball"); }
    reset(mode) {
      this.yaw = -Math.PI / 2 - 0.9; this.pitch = mode === "orbit" ? 0.62 : 0.42;
      this.dist = mode === "orbit" ? 11500 : 3200; this.target = [0, 0, 0]; this.pan = [0, 0, 0];
    }
    setup(eye, target, width, height) {
      this.eye = eye;
      this.f = norm(sub(target, eye));
      let r = cross([0, 0, 1], this.f);  // Rocket League is left-handed: +x is on the left looking down +y
      if (len(r) < 1e-6) r = [1, 0, 0];
      this.r = norm(r);
      this.u = cross(this.f, this.r);
      this.w = width; this.h = height;
      this.focal = 0.5 * height / Math.tan((55 * Math.PI / 180) / 2);
    }
    toView(p) { const d = sub(p, this.eye); return [dot(d, this.r), dot(d, this.u), dot(d, this.f)]; }
    project(c) { return [this.w / 2 + this.focal * c[0] / c[2], this.h / 2 - this.focal * c[1] / c[2]]; }
  }
  const NEAR = 20;
  function clipPolygon(points) {  // Sutherland-Hodgman against the near plane, in view space
    const out = [];
    for (let i = 0; i < points.length; i++) {
      const a = points[i], b = points[(i + 1) % points.length];
      const ain = a[2] >= NEAR, bin = b[2] >= NEAR;
      if (ain) out.push(a);
      if (ain !== bin) {
        const t = (NEAR - a[2]) / (b[2] - a[2]);
        out.push([lerp(a[0], b[0], t), lerp(a[1], b[1], t), NEAR]);
      }
    }
    return out;
  }

  // ------------------------------------------------------------------ scene
  function octagon(F, z) {
    const X = F.side_wall_x, Y = F.back_wall_y, c = F.corner_sum;
    return [[X, c - X, z], [c - Y, Y, z], [-(c - Y), Y, z], [-X, c - X, z],
            [-X, -(c - X), z], [-(c - Y), -Y, z], [c - Y, -Y, z], [X, -(c - X), z]];
  }
  function circle(cx, cy, z, r, n) {
    const pts = [];
    for (let i = 0; i < n; i++) {
      const a = 2 * Math.PI * i / n;
      pts.push([cx + r * Math.cos(a), cy + r * Math.sin(a), z]);
    }
    return pts;
  }
  const COLORS = {
    blue: [47, 110, 255], orange: [255, 138, 31], field: [30, 92, 52], line: "rgba(235,255,240,0.55)",
  };
  const rgb = (c, k, a) => {
    const ch = (v) => Math.min(255, Math.round(v * k));
    return `rgba(${ch(c[0])},${ch(c[1])},${ch(c[2])},${a === undefined ? 1 : a})`;
  };

  function boxFaces(center, axes, half) {
    const [fw, rt, up] = axes;
    const corner = (sx, sy, sz) =>
      add(center, add(mul(fw, sx * half[0]), add(mul(rt, sy * half[1]), mul(up, sz * half[2]))));
    const faces = [
      { n: fw, p: [corner(1, -1, -1), corner(1, 1, -1), corner(1, 1, 1), corner(1, -1, 1)], shade: 1.0 },
      { n: mul(fw, -1), p: [corner(-1, -1, -1), corner(-1, -1, 1), corner(-1, 1, 1), corner(-1, 1, -1)], shade: 0.55 },
      { n: rt, p: [corner(-1, 1, -1), corner(-1, 1, 1), corner(1, 1, 1), corner(1, 1, -1)], shade: 0.75 },
      { n: mul(rt, -1), p: [corner(-1, -1, -1), corner(1, -1, -1), corner(1, -1, 1), corner(-1, -1, 1)], shade: 0.75 },
      { n: up, p: [corner(-1, -1, 1), corner(1, -1, 1), corner(1, 1, 1), corner(-1, 1, 1)], shade: 0.9 },
      { n: mul(up, -1), p: [corner(-1, -1, -1), corner(-1, 1, -1), corner(1, 1, -1), corner(1, -1, -1)], shade: 0.35 },
    ];
    return faces;
  }

  // ------------------------------------------------------------------ viewer
  class Viewer {
    constructor(meta, ch) {
      this.meta = meta; this.ch = ch;
      this.T = ch.cut.shape[0]; this.C = ch.car_pos.shape[1];
      this.dt = meta.frame_seconds;
      this.duration = (this.T - 1) * this.dt;
      this.time = 0; this.playing = false; this.speed = 1;
      this.camera = new Camera(); this.mode = "ball";
      this.canvas = document.getElementById("view");
      this.ctx = this.canvas.getContext("2d");
      this.F = meta.field;
      this.teams = meta.car_teams;
      this.carNames = this.teams.map((t, i) => (t === 0 ? "Blue " : "Orange ") +
        (this.teams.slice(0, i + 1).filter((x) => x === t).length));
      this.setupDom();
      this.resize();
      window.addEventListener("resize", () => { this.resize(); this.draw(); });
      window.addEventListener("hashchange", () => this.applyHash());
    }

    setupDom() {
      const $ = (id) => document.getElementById(id);
      $("blue-name").textContent = this.meta.blue_name; $("orange-name").textContent = this.meta.orange_name;
      document.title = `${this.meta.blue_name} vs ${this.meta.orange_name} - speedflip replay`;
      this.playBtn = $("play"); this.scrub = $("scrub"); this.timeLabel = $("time");
      this.scrub.max = String(this.duration);
      this.playBtn.onclick = () => this.setPlaying(!this.playing);
      this.scrub.oninput = () => { this.time = parseFloat(this.scrub.value); this.draw(); };
      $("speed").onchange = (e) => { this.speed = parseFloat(e.target.value); };
      const cam = $("camera");
      const modes = [["ball", "Ball follow"], ["orbit", "Orbit camera"], ["top", "Top view"]];
      this.carNames.forEach((name, i) => modes.push(["car" + i, name + " cam"]));
      for (const [value, label] of modes) {
        const o = document.createElement("option");
        o.value = value; o.textContent = label; cam.appendChild(o);
      }
      cam.onchange = (e) => this.setMode(e.target.value);
      this.cameraSelect = cam;
      $("reset").onclick = () => { this.camera.reset(this.mode); this.draw(); };
      const boosts = $("boosts");
      this.boostRows = this.carNames.map((name, i) => {
        const row = document.createElement("div"); row.className = "car";
        const color = this.teams[i] === 0 ? COLORS.blue : COLORS.orange;
        row.innerHTML = `<span style="width:64px;color:${rgb(color, 1)}">${name}</span><div class="bar">` +
          `<div class="fill" style="background:${rgb(color, 1)}"></div></div><span class="amount">0</span>`;
        boosts.appendChild(row);
        return { fill: row.querySelector(".fill"), amount: row.querySelector(".amount") };
      });
      // mouse: orbit, pan, zoom
      let drag = null;
      this.canvas.addEventListener("pointerdown", (e) => {
        drag = { x: e.clientX, y: e.clientY, pan: e.shiftKey || e.button === 2 };
        this.canvas.classList.add("dragging"); this.canvas.setPointerCapture(e.pointerId);
      });
      this.canvas.addEventListener("pointermove", (e) => {
        if (!drag) return;
        const dx = e.clientX - drag.x, dy = e.clientY - drag.y; drag.x = e.clientX; drag.y = e.clientY;
        const c = this.camera;
        if (drag.pan && this.mode === "orbit") {
          const k = c.dist / 900;
          c.pan = add(c.pan, add(mul(c.r || [1, 0, 0], -dx * k), mul([c.f ? c.f[0] : 0, c.f ? c.f[1] : 1, 0], dy * k)));
        } else {
          c.yaw -= dx * 0.006; c.pitch = Math.max(-0.05, Math.min(1.5, c.pitch + dy * 0.005));
        }
        this.draw();
      });
      const end = () => { drag = null; this.canvas.classList.remove("dragging"); };
      this.canvas.addEventListener("pointerup", end); this.canvas.addEventListener("pointercancel", end);
      this.canvas.addEventListener("contextmenu", (e) => e.preventDefault());
      this.canvas.addEventListener("wheel", (e) => {
        e.preventDefault();
        this.camera.dist = Math.max(300, Math.min(30000, this.camera.dist * Math.exp(e.deltaY * 0.001)));
        this.draw();
      }, { passive: false });
      window.addEventListener("keydown", (e) => {
        if (e.target && e.target.tagName === "SELECT") return;
        if (e.code === "Space") { e.preventDefault(); this.setPlaying(!this.playing); }
        else if (e.code === "ArrowRight") { this.seek(this.time + 5); }
        else if (e.code === "ArrowLeft") { this.seek(this.time - 5); }
        else if (e.key === "c") {
          const i = (this.cameraSelect.selectedIndex + 1) % this.cameraSelect.options.length;
          this.cameraSelect.selectedIndex = i; this.setMode(this.cameraSelect.value);
        }
      });
    }

    setMode(mode) {
      const changed = mode !== this.mode;
      this.mode = mode; this.cameraSelect.value = mode;
      if (changed && (mode === "ball" || mode === "orbit")) this.camera.reset(mode);
      this.draw();
    }
    setPlaying(on) {
      this.playing = on; this.playBtn.textContent = on ? "Pause" : "Play";
      if (on && this.time >= this.duration) this.time = 0;
      this.last = performance.now();
      if (on) requestAnimationFrame((t) => this.tick(t));
    }
    seek(t) { this.time = Math.max(0, Math.min(this.duration, t)); this.draw(); }
    tick(now) {
      if (!this.playing) return;
      const dt = Math.min(0.25, (now - this.last) / 1000); this.last = now;
      this.time += dt * this.speed;
      if (this.time >= this.duration) { this.time = this.duration; this.setPlaying(false); }
      this.draw();
      if (this.playing) requestAnimationFrame((t) => this.tick(t));
    }
    applyHash() {
      const params = new URLSearchParams(location.hash.replace(/^#/, ""));
      if (params.has("t")) this.time = Math.max(0, Math.min(1, parseFloat(params.get("t")) || 0)) * this.duration;
      if (params.has("s")) this.time = Math.max(0, Math.min(this.duration, parseFloat(params.get("s")) || 0));
      if (params.has("cam")) {
        const m = params.get("cam"); if ([...this.cameraSelect.options].some((o) => o.value === m)) this.setMode(m);
      }
      if (params.has("speed")) this.speed = parseFloat(params.get("speed")) || 1;
      const play = params.has("play") ? params.get("play") !== "0" : !(params.has("t") || params.has("s"));
      this.draw();
      this.setPlaying(play);
    }
    resize() {
      const dpr = window.devicePixelRatio || 1;
      const w = this.canvas.clientWidth || window.innerWidth, h = this.canvas.clientHeight || window.innerHeight;
      this.canvas.width = Math.max(1, Math.round(w * dpr)); this.canvas.height = Math.max(1, Math.round(h * dpr));
      this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      this.cssW = w; this.cssH = h;
    }

    // -------------------------------------------------------------- state at a time
    frameState(time) {
      const f = Math.max(0, Math.min(this.T - 1, time / this.dt));
      let i = Math.floor(f), a = f - i;
      if (i >= this.T - 1) { i = this.T - 1; a = 0; }
      const j = a > 0 && !this.ch.cut.data[i + 1] ? i + 1 : i;
      const k = j === i ? 0 : a;
      const near = a < 0.5 || j === i ? i : j;
      const ch = this.ch;
      const pos = (arr, idx, scale) => [arr[idx] * scale, arr[idx + 1] * scale, arr[idx + 2] * scale];
      const lerpPos = (name, base) => {
        const c = ch[name]; const p = pos(c.data, i * base.stride + base.off, c.scale);
        const q = pos(c.data, j * base.stride + base.off, c.scale);
        return [lerp(p[0], q[0], k), lerp(p[1], q[1], k), lerp(p[2], q[2], k)];
      };
      const lerpQuat = (name, stride, off) => {
        const d = ch[name].data, s = ch[name].scale;
        const p = [0, 1, 2, 3].map((n) => d[i * stride + off + n] * s);
        const q = [0, 1, 2, 3].map((n) => d[j * stride + off + n] * s);
        const sign = p[0] * q[0] + p[1] * q[1] + p[2] * q[2] + p[3] * q[3] < 0 ? -1 : 1;
        return p.map((v, n) => lerp(v, sign * q[n], k));
      };
      const C = this.C;
      const state = {
        ball: lerpPos("ball_pos", { stride: 3, off: 0 }),
        ballRot: lerpQuat("ball_rot", 4, 0),
        cars: [],
        pads: ch.pads.data.subarray(near * 34, near * 34 + 34),
        blue: ch.scores.data[near * 2], orange: ch.scores.data[near * 2 + 1],
        clock: lerp(ch.clock.data[i], ch.clock.data[j], k),
        frame: near,
      };
      for (let c = 0; c < C; c++) {
        const q = lerpQuat("car_rot", 4 * C, 4 * c);
        state.cars.push({
          pos: lerpPos("car_pos", { stride: 3 * C, off: 3 * c }),
          axes: quatAxes(q[0], q[1], q[2], q[3]),
          boost: ch.boost.data[near * C + c],
          flags: ch.flags.data[near * C + c],
          team: this.teams[c],
        });
      }
      return state;
    }
    lastGoal(frame) {  // seconds since the most recent goal at or before this frame, or Infinity
      const s = this.ch.scores.data;
      for (let f = frame; f > 0 && frame - f < 60; f--) {
        if (s[f * 2] !== s[f * 2 - 2] || s[f * 2 + 1] !== s[f * 2 - 1]) {
          return { ago: (frame - f) * this.dt, team: s[f * 2] !== s[f * 2 - 2] ? 0 : 1 };
        }
      }
      return null;
    }

    // -------------------------------------------------------------- drawing
    placeCamera(st) {
      const c = this.camera, W = this.cssW, H = this.cssH;
      let eye, target;
      if (this.mode === "top") {
        target = [0, 0, 0]; eye = [0.001, -1, 15500];
        const f = norm(sub(target, eye)); c.setup(eye, target, W, H);
        // keep +y (orange goal) at the top of the screen
        c.f = f; c.u = [0, 1, 0]; c.r = norm(cross(c.u, c.f)); return;
      }
      if (this.mode.startsWith("car")) {
        const car = st.cars[parseInt(this.mode.slice(3), 10)];
        let dir = sub(st.ball, car.pos); dir[2] = 0;
        dir = len(dir) < 1 ? car.axes[0] : norm(dir);
        eye = add(car.pos, add(mul(dir, -420), [0, 0, 190]));
        target = add(st.ball, [0, 0, 0]);
        if (len(sub(target, eye)) < 300) target = add(car.pos, mul(dir, 800));
        c.setup(eye, target, W, H); return;
      }
      target = this.mode === "ball" ? st.ball : add(c.target, c.pan);
      const cp = Math.cos(c.pitch);
      eye = add(target, mul([cp * Math.cos(c.yaw), cp * Math.sin(c.yaw), Math.sin(c.pitch)], c.dist));
      if (eye[2] < 30) eye[2] = 30;
      c.setup(eye, target, W, H);
    }

    draw() {
      const ctx = this.ctx, W = this.cssW, H = this.cssH, F = this.F;
      const st = this.frameState(this.time);
      this.placeCamera(st);
      const cam = this.camera;
      const sky = ctx.createLinearGradient(0, 0, 0, H);
      sky.addColorStop(0, "#0b1020"); sky.addColorStop(1, "#1b2333");
      ctx.fillStyle = sky; ctx.fillRect(0, 0, W, H);

      const poly = (pts, fill, stroke, lineWidth) => {
        const v = clipPolygon(pts.map((p) => cam.toView(p)));
        if (v.length < 3) return;
        ctx.beginPath();
        v.forEach((p, n) => {
          const s = cam.project(p);
          if (n === 0) ctx.moveTo(s[0], s[1]); else ctx.lineTo(s[0], s[1]);
        });
        ctx.closePath();
        if (fill) { ctx.fillStyle = fill; ctx.fill(); }
        if (stroke) { ctx.strokeStyle = stroke; ctx.lineWidth = lineWidth || 1; ctx.stroke(); }
      };
      const line = (a, b, stroke, width) => {
        let p = cam.toView(a), q = cam.toView(b);
        if (p[2] < NEAR && q[2] < NEAR) return;
        const cut = (u, w) => {
          const t = (NEAR - u[2]) / (w[2] - u[2]);
          return [lerp(u[0], w[0], t), lerp(u[1], w[1], t), NEAR];
        };
        if (p[2] < NEAR) p = cut(p, q);
        if (q[2] < NEAR) q = cut(q, p);
        const s = cam.project(p), e = cam.project(q);
        ctx.beginPath(); ctx.moveTo(s[0], s[1]); ctx.lineTo(e[0], e[1]);
        ctx.strokeStyle = stroke; ctx.lineWidth = width || 1; ctx.stroke();
      };

      // floor, markings, pads, shadows: always below everything else
      const floor = octagon(F, 0);
      const above = cam.eye[2] > 0;
      if (above) {
        poly(floor, rgb(COLORS.field, 1), null);
        // stripes for a sense of depth
        for (let y = -F.back_wall_y + 512; y < F.back_wall_y; y += 1024) {
          const x = Math.min(F.side_wall_x, F.corner_sum - Math.abs(y) - 512);
          poly([[-x, y, 0], [x, y, 0], [x, y + 512, 0], [-x, y + 512, 0]], rgb(COLORS.field, 1.12), null);
        }
        line([-F.side_wall_x, 0, 1], [F.side_wall_x, 0, 1], COLORS.line, 2);
        poly(circle(0, 0, 1, 900, 40), null, COLORS.line, 2);
        for (const s of [-1, 1]) {
          const gy = s * F.back_wall_y, gw = F.goal_half_width;
          poly([[-gw - 400, gy, 1], [gw + 400, gy, 1], [gw + 400, gy - s * 1000, 1], [-gw - 400, gy - s * 1000, 1]],
            null, COLORS.line, 2);
        }
        F.pads.forEach((p, n) => {
          const active = st.pads[n] > 0;
          const r = F.pad_big[n] ? 160 : 90;
          const fill = active ? "rgba(255,205,60,0.95)" : "rgba(70,70,60,0.8)";
          poly(circle(p[0], p[1], 2, r, 16), fill, "rgba(0,0,0,0.35)");
        });
        const shadow = (p, r) => poly(circle(p[0], p[1], 3, r, 14), "rgba(0,0,0,0.35)", null);
        shadow(st.ball, F.ball_radius * Math.max(0.35, 1 - st.ball[2] / 2500));
        st.cars.forEach((car) => { if (!(car.flags & 1)) shadow(car.pos, 75); });
      }

      // walls: seen from inside (behind the play) filled faintly now, seen from outside as outlines at the end
      const top = octagon(F, F.ceiling_z);
      const outlines = [];
      for (let n = 0; n < 8; n++) {
        const a = floor[n], b = floor[(n + 1) % 8], ta = top[n], tb = top[(n + 1) % 8];
        let inward = norm(cross(sub(b, a), [0, 0, 1]));
        if (dot(inward, mul(add(a, b), -0.5)) < 0) inward = mul(inward, -1);  // point towards the field centre
        const seenInside = dot(inward, sub(cam.eye, a)) > 0;
        const quad = [a, b, tb, ta];
        if (seenInside) poly(quad, "rgba(120,150,200,0.10)", "rgba(160,190,230,0.35)", 1);
        else outlines.push(quad);
      }

      // sorted solids: goals, cars, ball, big pad orbs
      const items = [];
      const pushPoly = (pts, fill, stroke) => {
        const v = pts.map((p) => cam.toView(p));
        const depth = v.reduce((s, p) => s + p[2], 0) / v.length;
        items.push({ depth, draw: () => poly(pts, fill, stroke) });
      };
      for (const s of [-1, 1]) {
        const color = s < 0 ? COLORS.blue : COLORS.orange;
        const y0 = s * F.back_wall_y, y1 = s * (F.back_wall_y + F.goal_depth);
        const gw = F.goal_half_width, gh = F.goal_height;
        const fill = rgb(color, 0.8, 0.28), stroke = rgb(color, 1.15, 0.95);
        pushPoly([[-gw, y1, 0], [gw, y1, 0], [gw, y1, gh], [-gw, y1, gh]], fill, stroke);
        pushPoly([[-gw, y0, 0], [-gw, y1, 0], [-gw, y1, gh], [-gw, y0, gh]], fill, stroke);
        pushPoly([[gw, y0, 0], [gw, y1, 0], [gw, y1, gh], [gw, y0, gh]], fill, stroke);
        pushPoly([[-gw, y0, gh], [gw, y0, gh], [gw, y1, gh], [-gw, y1, gh]], fill, stroke);
        pushPoly([[-gw, y0, 1], [gw, y0, 1], [gw, y1, 1], [-gw, y1, 1]], rgb(color, 0.5, 0.6), null);
      }
      st.cars.forEach((car, n) => {
        if (car.flags & 1) return;  // demolished
        const color = car.team === 0 ? COLORS.blue : COLORS.orange;
        const [fw, rt, up] = car.axes;
        // far away (overview cameras) cars are drawn up to 2.2x larger so they stay visible
        const k = Math.min(2.2, Math.max(1, cam.toView(car.pos)[2] / 5000));
        const off = mul(F.car_offset, k), size = mul(F.car_size, k);
        const center = add(car.pos, add(mul(fw, off[0]), mul(up, off[2])));
        const body = boxFaces(center, car.axes, [size[0] / 2, size[1] / 2, size[2] / 2]);
        const cabinCenter = add(center, add(mul(fw, -14 * k), mul(up, size[2] / 2 + 12 * k)));
        const cabin = boxFaces(cabinCenter, car.axes, [34 * k, size[1] / 2 - 8 * k, 12 * k]);
        for (const [faces, tone] of [[body, 1], [cabin, 0.75]]) {
          for (const face of faces) {
            const c0 = face.p.reduce((s, p) => add(s, mul(p, 0.25)), [0, 0, 0]);
            if (dot(face.n, sub(cam.eye, c0)) <= 0) continue;
            pushPoly(face.p, rgb(color, face.shade * tone), "rgba(0,0,0,0.35)");
          }
        }
        if (car.flags & 4) {  // boosting: a flame out of the back
          const back = add(center, mul(fw, -size[0] / 2));
          const tip = add(back, mul(fw, -150 * k));
          pushPoly([add(back, mul(rt, -18 * k)), add(back, mul(up, 14 * k)), add(back, mul(rt, 18 * k)), tip],
            "rgba(255,200,60,0.9)", "rgba(255,90,20,0.9)");
        }
        if (this.mode === "car" + n) return;
        const label = add(car.pos, [0, 0, 150 * k]);
        const v = cam.toView(label);
        items.push({ depth: v[2] - 1, draw: () => {
          if (v[2] < NEAR) return;
          const s = cam.project(v);
          ctx.font = "bold 12px system-ui, sans-serif"; ctx.textAlign = "center";
          ctx.fillStyle = "rgba(0,0,0,0.55)"; ctx.fillRect(s[0] - 18, s[1] - 12, 36, 16);
          ctx.fillStyle = rgb(color, 1.2); ctx.fillText(String(Math.round(car.boost)), s[0], s[1] + 1);
        } });
      });
      const ballView = cam.toView(st.ball);
      items.push({ depth: ballView[2], draw: () => {
        if (ballView[2] < NEAR) return;
        const grow = Math.min(2.2, Math.max(1, ballView[2] / 5000));
        const s = cam.project(ballView), r = cam.focal * F.ball_radius * grow / ballView[2];
        const g = ctx.createRadialGradient(s[0] - r * 0.35, s[1] - r * 0.35, r * 0.1, s[0], s[1], r);
        g.addColorStop(0, "#ffffff"); g.addColorStop(1, "#9aa3ad");
        ctx.beginPath(); ctx.arc(s[0], s[1], Math.max(1, r), 0, 2 * Math.PI);
        ctx.fillStyle = g; ctx.fill(); ctx.strokeStyle = "rgba(0,0,0,0.5)"; ctx.lineWidth = 1; ctx.stroke();
      } });
      F.pads.forEach((p, n) => {
        if (!F.pad_big[n] || !(st.pads[n] > 0)) return;
        const v = cam.toView([p[0], p[1], 70]);
        items.push({ depth: v[2], draw: () => {
          if (v[2] < NEAR) return;
          const s = cam.project(v), r = cam.focal * 45 / v[2];
          ctx.beginPath(); ctx.arc(s[0], s[1], Math.max(1, r), 0, 2 * Math.PI);
          ctx.fillStyle = "rgba(255,190,40,0.85)"; ctx.fill();
        } });
      });
      items.sort((a, b) => b.depth - a.depth);
      for (const it of items) it.draw();
      for (const quad of outlines) poly(quad, null, "rgba(160,190,230,0.25)", 1);

      this.updateHud(st);
    }

    updateHud(st) {
      const fmt = (s) => {
        s = Math.max(0, s);
        return `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, "0")}`;
      };
      document.getElementById("blue-score").textContent = st.blue;
      document.getElementById("orange-score").textContent = st.orange;
      const left = this.meta.game_seconds - st.clock;
      document.getElementById("clock").textContent = fmt(Math.ceil(Math.max(0, left) - 1e-6));
      this.timeLabel.textContent = `${fmt(this.time)} / ${fmt(this.duration)}`;
      if (document.activeElement !== this.scrub) this.scrub.value = String(this.time);
      st.cars.forEach((car, n) => {
        this.boostRows[n].fill.style.width = `${Math.max(0, Math.min(100, car.boost))}%`;
        this.boostRows[n].amount.textContent = String(Math.round(car.boost));
      });
      const goal = this.lastGoal(st.frame);
      const banner = document.getElementById("banner");
      if (goal && goal.ago < 2.5) {
        banner.textContent = goal.team === 0 ? `GOAL ${this.meta.blue_name}` : `GOAL ${this.meta.orange_name}`;
        banner.style.color = rgb(goal.team === 0 ? COLORS.blue : COLORS.orange, 1.2);
        banner.style.opacity = "1";
      } else banner.style.opacity = "0";
      root.dataset.replayFrame = String(st.frame);
    }
  }

  async function main() {
    const meta = JSON.parse(document.getElementById("replay-meta").textContent);
    const bytes = base64ToBytes(document.getElementById("replay-data").textContent);
    const buffer = await inflate(bytes, meta.encoding.compression);
    const ch = decodeChannels(buffer, meta.encoding.channels);
    meta.field.pads = meta.pad_positions; meta.field.pad_big = meta.pad_big;
    const viewer = new Viewer(meta, ch);
    window.speedflipViewer = viewer;
    viewer.applyHash();
    root.dataset.replayFrames = String(viewer.T);
    root.dataset.replayLoadMs = String(Math.round(performance.now()));  // navigation start -> first frame drawn
    if (!errors.length) root.dataset.replayStatus = "ready";
  }
  main().catch((e) => fail(e && e.message ? e.message : e));
})();
"""
