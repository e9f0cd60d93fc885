// Renders the OpenAPI document the gateway serves with the bundled Redoc.
(function () {
  var el = document.getElementById('reference');
  Redoc.init(el.dataset.spec, {
    expandResponses: '200,201',
    pathInMiddlePanel: true,
    sortPropsAlphabetically: false,
    scrollYOffset: '.docs-nav',
    // System fonts: the page looks the same whether or not Redoc's defaults (Montserrat, Roboto)
    // are installed, and none is ever downloaded.
    theme: { typography: { fontFamily: 'system-ui, sans-serif', headings: { fontFamily: 'system-ui, sans-serif' }, code: { fontFamily: 'ui-monospace, monospace' } } }
  }, el, function (err) {
    if (err) {
      el.textContent = 'The API reference could not be rendered: ' + err;
    }
    document.body.dataset.rendered = err ? 'error' : 'ok';
  });
})();
