"""FaaSnap (Ao et al., EuroSys '22) on icebox's `vm` backend: the faasnap-fig6 recipe's
protocol (fig6_run), page-cache control (pagecache), analysis (fig6) and tables (fig6_render)."""
