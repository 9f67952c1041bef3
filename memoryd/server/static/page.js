// Validation errors (422) and state conflicts (409) carry a fragment worth showing; any
// other error from a page request arrives as a readable line that the server retargets
// to #page-error (page/errors.py), so it is swapped too, never raw JSON into a card.
htmx.config.responseHandling = [
  {code: "204", swap: false},
  {code: "[23]..", swap: true},
  {code: "(404|409|422)", swap: true, error: false},
  {code: "[45]..", swap: true, error: true},
];
