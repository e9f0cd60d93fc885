// Renders the AsyncAPI document the gateway serves with the bundled AsyncAPI React component.
(function () {
  var el = document.getElementById('events');
  fetch(el.dataset.spec, { headers: { Accept: 'application/yaml' } })
    .then(function (res) {
      if (!res.ok) { throw new Error(el.dataset.spec + ' answered ' + res.status); }
      return res.text();
    })
    .then(function (schema) {
      AsyncApiStandalone.render({
        schema: schema,
        config: {
          show: { sidebar: true, info: true, servers: true, operations: true, messages: true, messageExamples: true, schemas: true, errors: true },
          sidebar: { showOperations: 'byDefault' },
          expand: { messageExamples: true }
        }
      }, el);
      document.body.dataset.rendered = 'ok';
    })
    .catch(function (err) {
      el.textContent = 'The event catalog could not be rendered: ' + err.message;
      document.body.dataset.rendered = 'error';
    });
})();
