// The draft's frame on a task page grows to the draft's full height, so no table row or chart is cut at its
// edge and the page scrolls as one. The framed draft runs no script; this reads its height (same origin).
(function () {
  function fit(frame) {
    var doc = frame.contentDocument;
    if (!doc || !doc.documentElement || doc.URL === "about:blank") return;
    var borders = frame.offsetHeight - frame.clientHeight;
    frame.style.height = doc.documentElement.scrollHeight + borders + "px";
    frame.dataset.fitted = "true";
  }
  document.querySelectorAll("iframe.draft").forEach(function (frame) {
    frame.addEventListener("load", function () { fit(frame); });
    if (frame.contentDocument && frame.contentDocument.readyState === "complete") fit(frame);
    window.addEventListener("resize", function () { fit(frame); });
  });
})();
