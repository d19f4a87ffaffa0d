// Placeholder until the page (h-ui) is merged: shows who the session is.
"use strict";
fetch("/api/session").then(function (r) { return r.json(); }).then(function (s) {
	var p = document.createElement("p");
	p.textContent = "user: " + (s.user || "(anonymous)") + ", role: " + s.role;
	document.getElementById("app").appendChild(p);
});
