"""The paper's steering design (Jia & Mu) and its Table 7 layout."""
