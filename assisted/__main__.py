from assisted.cli import main

raise SystemExit(main())
