// grafonnet's util: grid layout and panel ids.
local gridWidth = 24;

{
  grid: {
    // Lays panels out left to right, wrapping at the grid width (24). A panel keeps its own
    // gridPos.w/h when it has them, otherwise gets panelWidth x panelHeight. A row panel
    // starts a new line of its own (full width, height 1). Like grafonnet's wrapPanels.
    wrapPanels(panels, panelWidth=8, panelHeight=8, startY=0)::
      local step(acc, p) =
        local isRow = p.type == 'row';
        local w = if isRow then gridWidth else std.get(std.get(p, 'gridPos', {}), 'w', panelWidth);
        local h = if isRow then 1 else std.get(std.get(p, 'gridPos', {}), 'h', panelHeight);
        local newLine = isRow || acc.x + w > gridWidth;
        local x = if newLine then 0 else acc.x;
        local y = if newLine then acc.y + acc.lineHeight else acc.y;
        {
          panels: acc.panels + [p { gridPos: { x: x, y: y, w: w, h: h } }],
          x: if isRow then 0 else x + w,
          y: if isRow then y + 1 else y,
          lineHeight: if isRow then 0 else if newLine then h else std.max(acc.lineHeight, h),
        };
      std.foldl(step, panels, { panels: [], x: 0, y: startY, lineHeight: 0 }).panels,

    // grafonnet's makeGrid: the same layout; rows are kept as (uncollapsed) row panels.
    makeGrid(panels, panelWidth=8, panelHeight=8, startY=0)::
      self.wrapPanels(panels, panelWidth, panelHeight, startY),
  },

  panel: {
    // Numbers panels 1, 2, 3... in order (ids must be unique within a dashboard).
    setPanelIDs(panels)::
      std.mapWithIndex(function(i, p) p { id: i + 1 }, panels),
  },
}
