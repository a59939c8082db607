"""Applications beside translation: the HTTP server with LibreTranslate's API (`serve`), the robustness
report (`robustness`), CTranslate2 export (`export`) and the shipped models (`shipped`). May import every
other layer."""
