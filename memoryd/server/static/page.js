// Validation errors (422) and state conflicts (409) carry a fragment worth showing.
htmx.config.responseHandling = [
  {code: "204", swap: false},
  {code: "[23]..", swap: true},
  {code: "(404|409|422)", swap: true, error: false},
  {code: "[45]..", swap: false, error: true},
];
