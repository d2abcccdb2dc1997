// Narrows the listed packages as one types, then asks pkgproxy for the
// whole search (what is beyond the page's limit too) and shows its answer.
(function () {
  const box = document.getElementById('q');
  let asked = null, timer = null;
  function narrow(text) {
    document.querySelectorAll('tr[data-package]').forEach(function (row) {
      row.hidden = text !== '' && !row.dataset.package.includes(text);
    });
  }
  function search(value) {
    const url = '/cache/' + (value ? '?q=' + encodeURIComponent(value) : '');
    asked = url;
    fetch(url, { headers: { accept: 'text/html' } })
      .then(function (answer) { return answer.ok ? answer.text() : Promise.reject(answer.status); })
      .then(function (html) {
        if (asked !== url) return;
        const page = new DOMParser().parseFromString(html, 'text/html');
        document.getElementById('listing').replaceWith(page.getElementById('listing'));
        narrow(box.value.trim().toLowerCase());
        history.replaceState(null, '', url);
      })
      .catch(function () {});
  }
  box.addEventListener('input', function () {
    const value = box.value.trim();
    narrow(value.toLowerCase());
    clearTimeout(timer);
    timer = setTimeout(function () { search(value); }, 300);
  });
})();
