// taxbreak report: hover text for every chart mark, zoom and pan for the timeline.
// Inlined in the page and allowed by its Content-Security-Policy through its sha256 only;
// it reads no trace string as markup (textContent only) and fetches nothing.
(() => {
  "use strict";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const tip = document.createElement("div");
  tip.id = "tip";
  tip.setAttribute("role", "tooltip");
  tip.hidden = true;
  document.body.appendChild(tip);

  // Each mark's <title> becomes its data-tip: shown at once, styled, and without the
  // browser's own delayed tooltip on top of it. Without this script the titles stay.
  for (const title of document.querySelectorAll("svg.chart title")) {
    title.parentNode.setAttribute("data-tip", title.textContent);
    title.remove();
  }

  function showTip(event) {
    const mark = event.target instanceof Element ? event.target.closest("[data-tip]") : null;
    if (!mark) {
      tip.hidden = true;
      return;
    }
    tip.textContent = mark.getAttribute("data-tip");
    tip.hidden = false;
    const x = Math.min(event.clientX + 12, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = Math.max(x, 0) + window.scrollX + "px";
    tip.style.top = event.clientY + 16 + window.scrollY + "px";
  }
  document.addEventListener("mouseover", showTip);
  document.addEventListener("mousemove", showTip);

  function tickText(value) {
    if (value === 0) return "0";
    if (Math.abs(value) >= 100) return Math.round(value).toLocaleString("en-US");
    return Number(value.toPrecision(3)).toLocaleString("en-US", { maximumSignificantDigits: 3 });
  }

  function niceStep(raw) {
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return m * mag;
    return 10 * mag;
  }

  function svgElement(name, attrs, content) {
    const node = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    if (content !== undefined) node.textContent = content;
    return node;
  }

  function zoomable(svg) {
    const left = Number(svg.dataset.left), width = Number(svg.dataset.width), span = Number(svg.dataset.spanUs);
    const rects = Array.from(svg.querySelectorAll(".tl-plot rect"));
    const x0 = rects.map((r) => Number(r.getAttribute("x")) - left);
    const w0 = rects.map((r) => Number(r.dataset.w !== undefined ? r.dataset.w : r.getAttribute("width")));
    const axis = svg.querySelector(".tl-axis");
    const axisY = Number(axis.dataset.y);
    const baseLine = axis.firstElementChild;
    const minRange = width * 1e-5;
    let lo = 0, hi = width, pending = false, drag = null;

    const svgX = (event) => {
      const point = svg.createSVGPoint();
      point.x = event.clientX;
      point.y = event.clientY;
      return point.matrixTransform(svg.getScreenCTM().inverse()).x;
    };

    function drawTicks(a, b) {
      const step = niceStep((b - a) / 8);
      axis.replaceChildren(baseLine);
      for (let n = Math.ceil(a / step - 1e-9); n * step <= b + step * 1e-9; n++) {
        const x = left + ((n * step - a) / (b - a)) * width;
        axis.append(svgElement("line", { x1: x, y1: 0, x2: x, y2: axisY, stroke: "#eee" }),
                    svgElement("text", { x: x, y: axisY + 14, "text-anchor": "middle" }, tickText(n * step)));
      }
    }

    function render() {
      pending = false;
      const k = width / (hi - lo);
      for (let i = 0; i < rects.length; i++) {
        rects[i].setAttribute("x", (left + (x0[i] - lo) * k).toFixed(2));
        rects[i].setAttribute("width", Math.max(w0[i] * k, 0.5).toFixed(2));
      }
      const a = (lo / width) * span, b = (hi / width) * span;
      drawTicks(a, b);
      svg.dataset.view = a.toFixed(3) + " " + b.toFixed(3);  // µs shown, for readers and tests
    }

    function setView(newLo, newHi) {
      const range = Math.min(Math.max(newHi - newLo, minRange), width);
      lo = Math.min(Math.max(newLo, 0), width - range);
      hi = lo + range;
      if (!pending) {
        pending = true;
        window.requestAnimationFrame(render);
      }
    }

    svg.addEventListener("wheel", (event) => {
      const px = svgX(event) - left;
      if (px < 0 || px > width) return;  // over the labels the page scrolls as usual
      event.preventDefault();
      const at = lo + (px / width) * (hi - lo);
      const factor = Math.exp(event.deltaY * 0.002);
      setView(at - (at - lo) * factor, at + (hi - at) * factor);
    }, { passive: false });
    svg.addEventListener("mousedown", (event) => {
      const px = svgX(event) - left;
      if (px < 0 || px > width) return;
      event.preventDefault();
      drag = { x: svgX(event), lo: lo, hi: hi };
    });
    window.addEventListener("mousemove", (event) => {
      if (!drag) return;
      const shift = ((svgX(event) - drag.x) / width) * (drag.hi - drag.lo);
      setView(drag.lo - shift, drag.hi - shift);
    });
    window.addEventListener("mouseup", () => { drag = null; });
    svg.addEventListener("dblclick", () => setView(0, width));
    svg.dataset.view = "0.000 " + span.toFixed(3);
  }

  for (const svg of document.querySelectorAll("svg.timeline")) zoomable(svg);
})();
