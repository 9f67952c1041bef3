// Starts Swagger UI (/docs) or ReDoc (/redoc) on this server's OpenAPI document: a file
// of its own, so the pages need no inline script. validatorUrl null: Swagger UI would
// otherwise send the document to a public validator for its badge.
(function () {
  var root = document.getElementById("api-docs");
  var url = root.dataset.openapi;
  if (root.dataset.ui === "swagger") {
    window.ui = SwaggerUIBundle({
      url: url,
      dom_id: "#api-docs",
      deepLinking: true,
      validatorUrl: null,
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
      layout: "BaseLayout",
    });
  } else {
    Redoc.init(url, {}, root);
  }
})();
