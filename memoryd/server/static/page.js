// Validation errors (422) and state conflicts (409) carry a fragment worth showing; any
// other error from a page request arrives as a readable line that the server retargets
// to #page-error (page/errors.py), so it is swapped too, never raw JSON into a card.
htmx.config.responseHandling = [
  {code: "204", swap: false},
  {code: "[23]..", swap: true},
  {code: "(404|409|422)", swap: true, error: false},
  {code: "[45]..", swap: true, error: true},
];

// A problem the page's handlers did not turn into HTML (a body too large, refused before
// any route ran) arrives as JSON: it never replaces what is on the page; the error line
// says that the action failed.
document.addEventListener("htmx:beforeSwap", (event) => {
  const type = event.detail.xhr.getResponseHeader("Content-Type") || "";
  if (!type.includes("json")) return;
  event.detail.shouldSwap = false;
  const line = document.getElementById("page-error");
  if (line) line.textContent = line.dataset.failed || "";
});
