// segue dashboard: small progressive enhancements; every page works without this file.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Expand / collapse every provider request at once.
  for (const button of document.querySelectorAll("button[data-details]")) {
    button.addEventListener("click", () => {
      const open = button.dataset.details === "open";
      for (const details of document.querySelectorAll("details.request")) {
        details.open = open;
      }
    });
  }

  // Find rows on the current page of the run list (reads textContent only, never writes HTML).
  const filter = document.getElementById("quick-filter");
  if (filter) {
    filter.addEventListener("input", () => {
      const needle = filter.value.trim().toLowerCase();
      for (const row of document.querySelectorAll("tr.run-row")) {
        // A turn matches the id of the run it continues too (its "↳" names it only in a title).
        const continues = row.querySelector(".continues");
        const text = `${row.textContent} ${continues ? continues.dataset.continues : ""}`.toLowerCase();
        row.hidden = needle !== "" && !text.includes(needle);
      }
    });
  }
});
